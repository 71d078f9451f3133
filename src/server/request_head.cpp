#include "server/request_head.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string_view>
#include <thread>
#include <vector>

namespace sluice::server {
namespace {

// poll() on `fd` for `events`; revents, or 0 on a timeout or an error.
short wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 ? p.revents : 0;
}

void set_rcvlowat(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes);
}

// Like wait_for, in slices, giving up early once `running` says so.
short wait_while(int fd, short events, int timeout_ms, const std::function<bool()>& running) {
  constexpr int kSliceMs = 100;
  for (int waited = 0; waited < timeout_ms; waited += kSliceMs) {
    if (running && !running()) return 0;
    const short ev = wait_for(fd, events, std::min(kSliceMs, timeout_ms - waited));
    if (ev != 0) return ev;
  }
  return 0;
}

}  // namespace

HeadCheck peek_request_head(int fd, size_t limit, int pause_ms,
                            const std::function<bool()>& running) {
  std::vector<char> buf(limit);
  HeadCheck result = HeadCheck::Gone;
  size_t seen = 0;
  int idle_ms = 0;  // woken with no new bytes, in total since the last new byte
  constexpr int kNapMs = 10;
  for (;;) {
    const short ev = wait_while(fd, POLLIN | POLLRDHUP, pause_ms, running);
    if (ev == 0) break;  // a pause over pause_ms
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;  // closed, or an error
    const size_t got = static_cast<size_t>(n);
    if (std::string_view(buf.data(), got).find("\r\n\r\n") != std::string_view::npos) {
      result = HeadCheck::Fits;
      break;
    }
    if (got >= limit) {
      result = HeadCheck::TooLarge;
      break;
    }
    if (ev & (POLLRDHUP | POLLHUP | POLLERR)) break;  // nothing more will come: the head never ends
    if (got <= seen) {
      // Woken without a new byte (TCP may report a socket readable below
      // SO_RCVLOWAT under memory pressure): nap rather than spin.
      idle_ms += kNapMs;
      if (idle_ms > pause_ms) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(kNapMs));
      continue;
    }
    seen = got;
    idle_ms = 0;
    // poll() now wakes only once a byte beyond those seen has arrived.
    set_rcvlowat(fd, static_cast<int>(got + 1));
  }
  set_rcvlowat(fd, 1);
  return result;
}

void answer_and_close(int fd, const std::string& response, int pause_ms) {
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  // Closing with unread bytes would reset the connection, and a reset can
  // reach the client before it has read the answer.
  char scratch[4096];
  size_t drained = 0;
  constexpr size_t kMaxDrainBytes = size_t{1} << 20;
  while (drained < kMaxDrainBytes && wait_for(fd, POLLIN, pause_ms) != 0) {
    const ssize_t n = ::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace sluice::server
