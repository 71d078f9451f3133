// The HTTP server run in-process for the serve tests: a Session over the
// bundled stories-moe-8x model (models/) and a Server on a free loopback port,
// plus raw-socket helpers for requests cpp-httplib's client will not send.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/session.h"
#include "server/server.h"

namespace sluice::test {

inline std::string model_path() {
  return std::string(SLUICE_SOURCE_DIR) + "/models/stories-moe-8x-q8_0.gguf";
}

// A Session and a Server on a free port, serving from a thread until destroyed.
struct LiveServer {
  // n_slots: the model's sequence slots (`sluice serve --parallel`), their
  // state allocated lazily as `sluice serve` does; state_budget: --state-mb
  // in bytes (0: n_slots slots' worth).
  explicit LiveServer(server::ServerConfig cfg, int n_slots = 1, uint64_t state_budget = 0) {
    model::ModelConfig mc;
    mc.odirect = false;
    mc.n_slots = n_slots;
    mc.lazy_slots = true;
    mc.slot_state_budget = state_budget;
    session = std::make_unique<runtime::Session>(runtime::Session::open(model_path(), mc));
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    if (cfg.model_id.empty()) cfg.model_id = "stories";
    srv = std::make_unique<server::Server>(*session, std::move(cfg));
    port = srv->bind();
    thread = std::thread([this] { srv->run(); });
    // Answered only once run() accepts: stop() before that would be lost.
    auto h = client().Get("/health");
    EXPECT_TRUE(h && h->status == 200);
  }
  ~LiveServer() {
    srv->stop();
    thread.join();
  }
  httplib::Client client(const std::string& api_key = "") const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    if (!api_key.empty()) c.set_bearer_token_auth(api_key.c_str());
    return c;
  }
  std::unique_ptr<runtime::Session> session;
  std::unique_ptr<server::Server> srv;
  std::thread thread;
  int port = 0;
};

inline server::ServerConfig plain_config() {
  server::ServerConfig c;
  c.defaults.sampler.temperature = 0;  // greedy unless a request says otherwise
  return c;
}

// A connected TCP socket to the server (-1 on failure).
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{60, 0};  // a hang guard only: a broken server fails the test instead of blocking it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& s) {
  return ::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

// The value of the unlabelled metric `name` in /metrics (-1, and a failure, when absent).
inline double metric(const LiveServer& ls, const std::string& name) {
  auto m = ls.client().Get("/metrics");
  EXPECT_TRUE(m);
  if (!m) return -1;
  const size_t at = m->body.find("\n" + name + " ");
  EXPECT_NE(at, std::string::npos) << name;
  return at == std::string::npos ? -1.0 : std::strtod(m->body.c_str() + at + name.size() + 2, nullptr);
}

// Polls /metrics until `name` reaches `want` (bounded by a count of polls,
// not by time: the server must get there; a broken one fails the test).
inline bool wait_for_metric(const LiveServer& ls, const std::string& name, double want) {
  for (int i = 0; i < 2000; ++i) {
    if (metric(ls, name) >= want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A raw streaming request for the whole context, read until its first token
// arrived (it holds a slot and its state then). Returns the socket.
inline int open_long_stream(const LiveServer& ls) {
  const int fd = connect_to(ls.port);
  EXPECT_GE(fd, 0);
  if (fd < 0) return fd;
  const std::string body =
      nlohmann::json({{"prompt", "Once upon a time"}, {"max_tokens", -1}, {"stream", true}}).dump();
  EXPECT_TRUE(send_all(fd,
                       "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got;
  char buf[256];
  while (got.find("data: {") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    EXPECT_GT(n, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return fd;
}

}  // namespace sluice::test
