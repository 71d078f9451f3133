// `sluice serve` request limits (server/limits.h): the API key compare, the
// error writer, the body's JSON depth, the request head check on a raw
// socket, and every over-limit request against the live server, which must
// answer each with its status and a JSON error, then still serve.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "serve_test_support.h"
#include "server/api_key.h"
#include "server/errors.h"
#include "server/limits.h"
#include "server/request.h"
#include "server/request_head.h"
#include "util/json_text.h"
#include "tokenizer/tokenizer.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;

// ---- the API key -------------------------------------------------------------

TEST(ServeApiKey, ConstantTimeCompareAnswersLikeEquality) {
  EXPECT_TRUE(server::constant_time_equal("sekret-key", "sekret-key"));
  EXPECT_TRUE(server::constant_time_equal("", ""));
  EXPECT_FALSE(server::constant_time_equal("Sekret-key", "sekret-key"));   // first byte differs
  EXPECT_FALSE(server::constant_time_equal("sekret-kez", "sekret-key"));   // last byte differs
  EXPECT_FALSE(server::constant_time_equal("sekret-ke", "sekret-key"));    // a prefix
  EXPECT_FALSE(server::constant_time_equal("sekret-key!", "sekret-key"));  // longer
  EXPECT_FALSE(server::constant_time_equal("", "sekret-key"));
  EXPECT_FALSE(server::constant_time_equal("sekret-key", ""));
  // Bytes past the given ones compare against 0: a NUL-padded guess is still wrong.
  EXPECT_FALSE(server::constant_time_equal(std::string("ab\0", 3), "ab"));
  EXPECT_FALSE(server::constant_time_equal("ab", std::string("ab\0", 3)));

  EXPECT_TRUE(server::bearer_matches("Bearer sekret-key", "sekret-key"));
  EXPECT_FALSE(server::bearer_matches("bearer sekret-key", "sekret-key"));
  EXPECT_FALSE(server::bearer_matches("Bearer sekret-key ", "sekret-key"));
  EXPECT_FALSE(server::bearer_matches("sekret-key", "sekret-key"));
  EXPECT_FALSE(server::bearer_matches("", "sekret-key"));
}

// ---- the JSON writer ---------------------------------------------------------

TEST(ServeErrors, InvalidUtf8IsReplacedNeverThrown) {
  const std::string bad = "'stop' \xff\xfe cut \xE2\x82";  // stray bytes and a truncated euro sign
  std::string body;
  ASSERT_NO_THROW(body = server::error_body(400, bad));
  const json j = json::parse(body);
  EXPECT_EQ(j["error"]["message"], "'stop' \xEF\xBF\xBD\xEF\xBF\xBD cut \xEF\xBF\xBD");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["code"], 400);
  EXPECT_EQ(json::parse(server::error_body(401, "k"))["error"]["type"], "authentication_error");
  EXPECT_EQ(json::parse(server::error_body(503, "x"))["error"]["type"], "server_error");
  EXPECT_EQ(sluice::json_text(nlohmann::json{{"text", "a\xff"}}), "{\"text\":\"a\xEF\xBF\xBD\"}");
}

// ---- request bodies ----------------------------------------------------------

std::string body_error(std::string_view text) {
  try {
    server::parse_json_body(text);
  } catch (const server::RequestError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string nested_arrays(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(ServeRequest, JsonDepthIsCappedWhileParsing) {
  const std::string too_deep = "the request body nests deeper than 64 levels of objects and arrays";
  EXPECT_EQ(server::parse_json_body(nested_arrays(server::kMaxJsonDepth)).dump(),
            nested_arrays(server::kMaxJsonDepth));
  EXPECT_EQ(body_error(nested_arrays(server::kMaxJsonDepth + 1)), too_deep);
  EXPECT_EQ(body_error(nested_arrays(100000)), too_deep);  // never reaches anything recursive
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_EQ(body_error(objects), too_deep);
  // Unterminated and deep: the depth is found before the end is.
  EXPECT_EQ(body_error(std::string(100000, '[')), too_deep);
  EXPECT_EQ(body_error("{\"prompt\": "), "the request body is not valid JSON");
  EXPECT_EQ(server::parse_json_body(R"({"prompt": "x", "n": 1})")["n"], 1);
}

std::string request_error(const json& body, bool chat) {
  try {
    server::GenerationDefaults d;
    chat ? server::parse_chat_request(body, d) : server::parse_completion_request(body, d);
  } catch (const server::RequestError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ServeRequest, FieldLimitsNameTheFieldAndTheLimit) {
  const json msg = {{"role", "user"}, {"content", "x"}};
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  EXPECT_EQ(request_error(
                {{"prompt", "x"}, {"stop", std::string(server::kMaxStopStringBytes, 's')}}, false),
            "(no error)");
  EXPECT_EQ(request_error({{"prompt", "x"},
                           {"stop", {"a", std::string(server::kMaxStopStringBytes + 1, 's')}}},
                          false),
            "'stop' has a string of 257 bytes; the limit is 256");
  EXPECT_EQ(request_error(
                {{"prompt", "x"}, {"stop", std::vector<std::string>(server::kMaxStopStrings, "a")}},
                false),
            "(no error)");
  EXPECT_EQ(request_error({{"messages", std::vector<json>(server::kMaxMessages, msg)}}, true),
            "(no error)");
  EXPECT_EQ(request_error({{"messages", std::vector<json>(server::kMaxMessages + 1, msg)}}, true),
            "'messages' has 4097 entries; the limit is 4096");
  EXPECT_EQ(request_error({{"messages", json::array({msg})},
                           {"tools", std::vector<json>(server::kMaxTools, tool)}},
                          true),
            "(no error)");
  EXPECT_EQ(request_error({{"messages", json::array({msg})},
                           {"tools", std::vector<json>(server::kMaxTools + 1, tool)}},
                          true),
            "'tools' has 129 entries; the limit is 128");
  json big = tool;
  big["function"]["description"] = std::string(server::kMaxToolJsonBytes, 'd');
  const size_t big_bytes = sluice::json_text(big).size();
  EXPECT_EQ(
      request_error({{"messages", json::array({msg})}, {"tools", json::array({tool, big})}}, true),
      "'tools'[1] is " + std::to_string(big_bytes) + " bytes of JSON; the limit is 65536");
  // Out of int32 as an unsigned JSON number: named as sent, not wrapped.
  EXPECT_EQ(request_error({{"prompt", {1, 18446744073709551615ull}}}, false),
            "'prompt' has a token id out of range: 18446744073709551615");

  // Which field set max_tokens (the engine checks it against the context).
  server::GenerationDefaults d;
  EXPECT_EQ(server::parse_completion_request({{"prompt", "x"}}, d).max_tokens_field, "");
  EXPECT_EQ(
      server::parse_completion_request({{"prompt", "x"}, {"n_predict", -1}}, d).max_tokens_field,
      "n_predict");
  EXPECT_EQ(
      server::parse_completion_request({{"prompt", "x"}, {"n_predict", 3}, {"max_tokens", 4}}, d)
          .max_tokens_field,
      "max_tokens");
}

// ---- the request head --------------------------------------------------------

// Both ends of a loopback TCP connection.
struct TcpPair {
  TcpPair() {
    const int lst = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(lst, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(lst, 1) != 0 ||
        ::getsockname(lst, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ::close(lst);
      return;
    }
    client = test::connect_to(ntohs(addr.sin_port));
    server = ::accept(lst, nullptr, nullptr);
    ::close(lst);
  }
  ~TcpPair() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
  int client = -1, server = -1;
};

constexpr int kPauseMs = 30000;  // a hang guard only: no case here waits for it

TEST(ServeRequestHead, PeeksUntilTheHeadEndsOrTheLimit) {
  using server::HeadCheck;
  {
    // Complete in one piece, a body after it: Fits, and nothing is consumed.
    TcpPair p;
    ASSERT_GE(p.server, 0);
    const std::string req = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    ASSERT_TRUE(test::send_all(p.client, req));
    EXPECT_EQ(server::peek_request_head(p.server, 1024, kPauseMs), HeadCheck::Fits);
    std::string got(req.size(), '\0');
    EXPECT_EQ(::recv(p.server, got.data(), got.size(), MSG_WAITALL),
              static_cast<ssize_t>(req.size()));
    EXPECT_EQ(got, req);
  }
  {
    // In pieces, the terminator split across them.
    TcpPair p;
    ASSERT_GE(p.server, 0);
    std::thread sender([fd = p.client] {
      for (const char* piece : {"GET / HTTP/1.1\r\n", "Host: x\r", "\n", "\r\n"}) {
        test::send_all(fd, piece);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    EXPECT_EQ(server::peek_request_head(p.server, 1024, kPauseMs), HeadCheck::Fits);
    sender.join();
  }
  {
    // `limit` bytes and no end: TooLarge (the client may still be sending).
    TcpPair p;
    ASSERT_GE(p.server, 0);
    ASSERT_TRUE(test::send_all(p.client, "GET / HTTP/1.1\r\n" + std::string(2000, 'h')));
    EXPECT_EQ(server::peek_request_head(p.server, 1024, kPauseMs), HeadCheck::TooLarge);
  }
  {
    // Unfinished, then the client stops sending: Gone.
    TcpPair p;
    ASSERT_GE(p.server, 0);
    ASSERT_TRUE(test::send_all(p.client, "GET / HTTP/1.1\r\nHost: x\r\n"));
    ::shutdown(p.client, SHUT_WR);
    EXPECT_EQ(server::peek_request_head(p.server, 1024, kPauseMs), HeadCheck::Gone);
  }
  {
    // A server that stops does not wait for an idle client.
    TcpPair p;
    ASSERT_GE(p.server, 0);
    EXPECT_EQ(server::peek_request_head(p.server, 1024, kPauseMs, [] { return false; }),
              HeadCheck::Gone);
  }
}

// ---- the live server ---------------------------------------------------------

// A renderer that joins the contents: enough for the chat endpoint's limits.
std::string join_contents(const json& messages, const json&, bool) {
  std::string s;
  for (const json& m : messages) s += m["content"].get<std::string>();
  return s;
}

constexpr const char* kKey = "sekret-key";

struct Reply {
  int status = -1;
  json body;  // discarded when not JSON
  std::string message() const {
    return body.is_object() && body.contains("error") ? body["error"].value("message", "")
                                                      : "(no error)";
  }
  std::string type() const {
    return body.is_object() && body.contains("error") ? body["error"].value("type", "") : "";
  }
};

Reply reply_of(const httplib::Result& r) {
  if (!r) return {};
  return {r->status, json::parse(r->body, nullptr, false)};
}

// `request` (the whole HTTP request) over a raw socket, sent from a thread
// while the answer is read here: the server may answer before taking the
// whole upload. The answer ends when the server closes.
Reply raw_exchange(int port, const std::string& request) {
  const int fd = test::connect_to(port);
  if (fd < 0) return {};
  std::thread upload([fd, &request] { test::send_all(fd, request); });
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::shutdown(fd, SHUT_RDWR);  // ends a blocked upload
  upload.join();
  ::close(fd);
  Reply r;
  const size_t head_end = got.find("\r\n\r\n");
  if (got.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return r;
  r.status = std::atoi(got.c_str() + 9);
  r.body = json::parse(got.substr(head_end + 4), nullptr, false);
  return r;
}

TEST(ServeLimits, OverLimitRequestsAreRefusedAndTheServerCarriesOn) {
  server::ServerConfig cfg = test::plain_config();
  cfg.api_key = kKey;
  cfg.chat_renderer = join_contents;
  test::LiveServer ls(cfg);
  const int n_ctx = ls.session->model().n_ctx();
  auto client = [&] { return ls.client(kKey); };
  auto post = [&](const std::string& path, const std::string& body) {
    return reply_of(client().Post(path.c_str(), body, "application/json"));
  };
  const json msg = {{"role", "user"}, {"content", "Once upon a time"}};
  const json tool = {{"type", "function"},
                     {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}};
  // Each: the status, the error type, and a part of the message that names the field/limit.
  auto expect = [](const Reply& r, int status, const std::string& has, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body.dump();
    EXPECT_EQ(r.type(), server::error_type(status)) << what;
    EXPECT_NE(r.message().find(has), std::string::npos) << what << ": " << r.message();
    EXPECT_EQ(r.body["error"]["code"], status) << what;
  };

  // The API key: of the key's length (one byte off), of another length, absent.
  for (const std::string& key : {std::string("sekret-kez"), std::string("nope"), std::string()}) {
    expect(
        reply_of(ls.client(key).Post("/v1/completions", R"({"prompt": "x"})", "application/json")),
        401, "invalid or missing API key", "key '" + key + "'");
  }

  // The body: 9 MiB against the 8 MiB limit, by Content-Length, chunked, and
  // gzip-compressed (a few KiB on the wire).
  const size_t big = 9u << 20;
  const std::string auth = "Authorization: Bearer " + std::string(kKey) + "\r\n";
  expect(raw_exchange(ls.port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth +
                                   "Content-Length: " + std::to_string(big) + "\r\n\r\n" +
                                   std::string(big, ' ')),
         413, "too large: the limit is 8 MiB (--max-body-mb)", "Content-Length body");
  std::string chunks;
  for (size_t sent = 0; sent < big; sent += 0x10000)
    chunks += "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
  chunks += "0\r\n\r\n";
  auto chunked = [&](const std::string& request_line) {
    return request_line + "\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n" + chunks;
  };
  expect(raw_exchange(ls.port, chunked("POST /v1/completions HTTP/1.1")), 413, "the limit is 8 MiB",
         "chunked body");
  // Bodies no handler takes are refused unread (cpp-httplib alone would read them whole).
  expect(raw_exchange(ls.port, chunked("POST /nope HTTP/1.1")), 404, "no such endpoint",
         "POST elsewhere");
  expect(raw_exchange(ls.port, chunked("PUT /v1/completions HTTP/1.1")), 405,
         "method PUT is not allowed", "PUT");
  {
    auto c = client();
    c.set_compress(true);
    expect(reply_of(c.Post("/v1/completions", std::string(big, ' '), "application/json")), 413,
           "the limit is 8 MiB", "gzip body");
  }

  // The head: too many headers, too many bytes of them, a header line and a URI over httplib's
  // limits.
  {
    httplib::Headers many;
    for (size_t i = 0; i <= server::kMaxHeaderCount; ++i)
      many.emplace("X-H" + std::to_string(i), "v");
    expect(reply_of(client().Get("/v1/models", many)), 431, "headers; the limit is 100",
           "header count");
    httplib::Headers fat;
    for (int i = 0; i < 40; ++i) fat.emplace("X-F" + std::to_string(i), std::string(1000, 'f'));
    expect(reply_of(client().Get("/v1/models", fat)), 431, "over 32768 bytes", "head bytes");
    expect(reply_of(client().Get("/v1/models", {{"X-Long", std::string(9000, 'l')}})), 400,
           "header line over 8192", "header line");
    expect(reply_of(client().Get(("/v1/models?q=" + std::string(9000, 'u')).c_str())), 414,
           "URI is over 8192", "URI");
  }

  // The JSON: nested 100k deep, as a completion and as a chat.
  expect(post("/v1/completions", nested_arrays(100000)), 400, "nests deeper than 64", "deep body");
  expect(
      post(
          "/v1/chat/completions",
          R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": )" +
              nested_arrays(1000) + "}}"),
      400, "nests deeper than 64", "deep schema");

  // The fields.
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 2}};
  json j = base;
  j["stop"] = std::vector<std::string>(server::kMaxStopStrings + 1, "a");
  expect(post("/v1/completions", j.dump()), 400, "'stop' has more than 16 strings", "stop count");
  j = base;
  j["stop"] = std::string(server::kMaxStopStringBytes + 1, 's');
  expect(post("/v1/completions", j.dump()), 400,
         "'stop' has a string of 257 bytes; the limit is 256", "stop length");
  expect(
      post("/v1/chat/completions", json({{"messages", json::array({msg})},
                                         {"tools", std::vector<json>(server::kMaxTools + 1, tool)}})
                                       .dump()),
      400, "'tools' has 129 entries; the limit is 128", "tool count");
  json fat_tool = tool;
  fat_tool["function"]["description"] = std::string(server::kMaxToolJsonBytes, 'd');
  expect(post("/v1/chat/completions",
              json({{"messages", json::array({msg})}, {"tools", json::array({fat_tool})}}).dump()),
         400, "'tools'[0] is", "tool size");
  expect(post("/v1/chat/completions",
              json({{"messages", std::vector<json>(server::kMaxMessages + 1, msg)}}).dump()),
         400, "'messages' has 4097 entries; the limit is 4096", "message count");
  const std::string ctx = "the context holds " + std::to_string(n_ctx) + " tokens";
  j = base;
  j["max_tokens"] = n_ctx + 1;
  expect(post("/v1/completions", j.dump()), 400,
         "'max_tokens' is " + std::to_string(n_ctx + 1) + "; " + ctx, "max_tokens");
  j = {{"prompt", "x"}, {"n_predict", 1000000}};
  expect(post("/v1/completions", j.dump()), 400, "'n_predict' is 1000000; " + ctx, "n_predict");
  j = base;
  j["n"] = 2;  // one slot: one choice at a time
  expect(post("/v1/completions", j.dump()), 400, "'n' is 2; this server generates at most 1 choices at once (--parallel)",
         "n");
  j["n"] = 17;
  expect(post("/v1/completions", j.dump()), 400, "'n' is 17; it must be 1..16", "n");
  expect(post("/v1/completions", R"({"prompt": [1, 100000]})"), 400, "outside the vocabulary",
         "token id");

  // max_tokens up to the context, and -1, still run: a prompt that leaves
  // room for 3 tokens gets 3.
  const std::vector<int32_t> long_prompt(static_cast<size_t>(n_ctx - 3), 5);
  for (const json& n : {json(n_ctx), json(-1)}) {
    const Reply r =
        post("/v1/completions", json({{"prompt", long_prompt}, {"max_tokens", n}}).dump());
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 3) << n;
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length") << n;
  }

  // Text that is not UTF-8 on its own (one byte of a 3-byte character) is
  // written with U+FFFD, not an error.
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(ls.session->gguf().metadata());
  int32_t lead_byte = -1;  // the byte token <0xE2>
  for (int32_t id = 0; id < tok.n_vocab() && lead_byte < 0; ++id)
    if (tok.token_to_piece(id, false) == "\xE2") lead_byte = id;
  ASSERT_GE(lead_byte, 0) << "the model has no <0xE2> byte token";
  const Reply d = post("/detokenize", json({{"tokens", json::array({lead_byte})}}).dump());
  ASSERT_EQ(d.status, 200) << d.body.dump();
  EXPECT_EQ(d.body["content"], "\xEF\xBF\xBD");

  // Still serving, with and without the key.
  const Reply ok = post("/v1/completions", base.dump());
  ASSERT_EQ(ok.status, 200) << ok.body.dump();
  EXPECT_EQ(ok.body["usage"]["completion_tokens"], 2);
  auto h = ls.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

}  // namespace
}  // namespace sluice
