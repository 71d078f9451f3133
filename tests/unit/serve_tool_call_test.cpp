// A tool call end to end: `sluice serve` (the real binary, on a free loopback
// port) serving a model built to answer with a Hermes tool call
// (tool_call_model.h) under the real Qwen3 chat template, asked through the
// HTTP endpoint (cpp-httplib here; the official OpenAI Node client too when
// node and the package are installed): the call comes back as OpenAI
// tool_calls, streamed or not, and the follow-up conversation with the call
// and its result renders and is answered.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/whole_file.h"
#include "synth_test_support.h"
#include "test_support.h"
#include "tool_call_model.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;

// `sluice serve ARGS --port 0` as a child process; the port is read from its
// "serving ... on http://HOST:PORT" line. Killed (SIGTERM) when destroyed;
// `timeout` ends it anyway should this process die first.
class ServeProcess {
 public:
  explicit ServeProcess(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/timeout", "300", SLUICE_BINARY, "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
    // Until the "serving" line (or the end: a failed start).
    char c;
    while (port_ <= 0 && ::read(out_, &c, 1) == 1) {
      log_ += c;
      const size_t at = log_.find(" on http://127.0.0.1:");
      if (c == '\n' && at != std::string::npos) port_ = std::atoi(log_.c_str() + at + 21);
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  int port() const { return port_; }
  const std::string& log() const { return log_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = -1;
  std::string log_;
};

const char* kTemplate = "data/chat-templates/Qwen-Qwen3-0.6B.jinja";

const json kTools = json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");

const json kQuestion = {{"role", "user"}, {"content", "What is the weather in Paris?"}};

// The model, built once, and `sluice serve` on it.
class ServeToolCall : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    if (!test::shared_has(kTemplate)) return;
    model = new test::TempFile("tool_call.gguf");
    const std::string tmpl = io::read_whole_file(test::shared_path(kTemplate), 1 << 20);
    test::write_tool_call_model(model->path.string(), tmpl);
    server = new ServeProcess({"-m", model->path.string(), "--no-odirect", "--temp", "0", "-n", "16"});
  }
  static void TearDownTestSuite() {
    delete server;
    delete model;
    server = nullptr;
    model = nullptr;
  }
  void SetUp() override {
    if (!model) GTEST_SKIP() << "needs ../shared/" << kTemplate;
    ASSERT_GT(server->port(), 0) << "sluice serve did not start:\n" << server->log();
  }
  static std::pair<int, json> post_chat(const json& body) {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(60, 0);
    auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (!res) return {-1, json()};
    return {res->status, body.value("stream", false) ? json(res->body) : json::parse(res->body, nullptr, false)};
  }
  static test::TempFile* model;
  static ServeProcess* server;
};
test::TempFile* ServeToolCall::model = nullptr;
ServeProcess* ServeToolCall::server = nullptr;

const json kWantCall = {{"id", "call_0"},
                        {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}};

TEST_F(ServeToolCall, TheCallComesBackAsToolCallsStreamedOrNot) {
  const json request = {{"messages", {kQuestion}}, {"tools", kTools}, {"max_tokens", 16}, {"temperature", 0}};
  auto [status, j] = post_chat(request);
  ASSERT_EQ(status, 200) << j.dump();
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "");
  EXPECT_FALSE(choice["message"].contains("reasoning_content"));
  EXPECT_EQ(choice["message"]["tool_calls"], json::array({kWantCall}));
  EXPECT_EQ(json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  // <tool_call>, the body, </tool_call>, then <|im_end|> ends it.
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);

  json streamed = request;
  streamed["stream"] = true;
  auto [st, body] = post_chat(streamed);
  ASSERT_EQ(st, 200);
  // Each event "data: {...}\n\n"; the call arrives whole in one delta.
  std::vector<json> events;
  const std::string text = body.get<std::string>();
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = text.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    ASSERT_EQ(text.compare(pos, 6, "data: "), 0) << text;
    const std::string payload = text.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") events.push_back(json::parse(payload));
    pos = end + 2;
  }
  ASSERT_GE(events.size(), 3u) << text;
  std::string content;
  json calls = json::array();
  for (size_t i = 0; i < events.size(); ++i) {
    const json& c = events[i]["choices"][0];
    const json& d = c["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    EXPECT_FALSE(d.contains("reasoning_content")) << events[i].dump();
    if (d.contains("tool_calls")) {
      for (json call : d["tool_calls"]) {
        EXPECT_EQ(call["index"], calls.size());
        call.erase("index");
        calls.push_back(call);
      }
    }
    EXPECT_EQ(c["finish_reason"], i + 1 == events.size() ? json("tool_calls") : json(nullptr)) << events[i].dump();
  }
  EXPECT_EQ(content, "");
  EXPECT_EQ(calls, json::array({kWantCall}));
}

TEST_F(ServeToolCall, TheFollowUpWithTheCallAndItsResultIsAnswered) {
  auto [s1, first] = post_chat({{"messages", {kQuestion}}, {"tools", kTools}, {"temperature", 0}});
  ASSERT_EQ(s1, 200) << first.dump();
  // As a client sends it back: the assistant message (content null) with its
  // call, then the tool's result.
  json assistant = first["choices"][0]["message"];
  assistant["content"] = nullptr;
  const json messages = {kQuestion, assistant,
                         {{"role", "tool"}, {"tool_call_id", "call_0"}, {"content", R"({"temperature_c": 21})"}}};
  auto [s2, second] = post_chat({{"messages", messages}, {"tools", kTools}, {"temperature", 0}});
  ASSERT_EQ(s2, 200) << second.dump();
  EXPECT_EQ(second["object"], "chat.completion");
  EXPECT_EQ(second["choices"][0]["message"]["role"], "assistant");
  // The rendered conversation holds the call and the result: a longer prompt
  // whose start (the first prompt and the call's opening) is reused from the KV cache.
  const int n1 = first["usage"]["prompt_tokens"], n2 = second["usage"]["prompt_tokens"];
  EXPECT_GT(n2, n1 + 10);
  EXPECT_GT(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), n1 - 1);
}

TEST_F(ServeToolCall, AStopStringCutsBeforeTheParserSeesTheText) {
  // Stopped at "</tool_call>" (never sent), the call is unfinished: it stays
  // content, as text, streamed or not.
  const json request = {{"messages", {kQuestion}}, {"tools", kTools}, {"temperature", 0}, {"stop", "</tool_call>"}};
  auto [status, j] = post_chat(request);
  ASSERT_EQ(status, 200) << j.dump();
  const std::string want = "<tool_call>" + std::string(test::kCallBody).substr(0, std::string(test::kCallBody).size() - 1);
  EXPECT_EQ(j["choices"][0]["message"]["content"], want);
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  json streamed = request;
  streamed["stream"] = true;
  auto [st, body] = post_chat(streamed);
  ASSERT_EQ(st, 200);
  const std::string text = body.get<std::string>();
  std::string content;
  for (size_t pos = text.find("data: {"); pos != std::string::npos; pos = text.find("data: {", pos + 1)) {
    const json d = json::parse(text.substr(pos + 6, text.find("\n\n", pos) - pos - 6))["choices"][0]["delta"];
    EXPECT_FALSE(d.contains("tool_calls"));
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(content, want);
  EXPECT_EQ(text.find("</tool_call>"), std::string::npos);
}

// tests/serve/openai_client.mjs's tool-call checks with the official client.
TEST_F(ServeToolCall, OpenAiNodeClient) {
  const std::string dir = test::source_path("tests/serve");
  int rc = 0;
  test::run_cmd("cd '" + dir + "' && node -e \"import('openai').then(()=>process.exit(0),()=>process.exit(1))\" 2>/dev/null", &rc);
  if (rc != 0) GTEST_SKIP() << "node or the openai npm package is missing (cd tests/serve && npm install openai)";
  const std::string out = test::run_cmd("cd '" + dir + "' && node openai_client.mjs " + server->url() + "/v1 tools 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("OPENAI_TOOL_CALLS_OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace sluice
