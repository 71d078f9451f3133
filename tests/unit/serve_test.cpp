// `sluice serve` (src/server): request parsing, the stop-string text stream,
// and the HTTP server run in-process on a free port over the bundled
// stories-moe-8x model (models/), driven with cpp-httplib's client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "grammar/json_prefix.h"
#include "runtime/session.h"
#include "server/response.h"
#include "server/engine.h"
#include "server/request.h"
#include "server/server.h"
#include "runtime/text_stream.h"
#include "serve_test_support.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;
using server::GenerationDefaults;
using server::GenerationRequest;
using server::RequestError;

// ---- request parsing -------------------------------------------------------

std::string parse_error(const json& body, bool chat = false) {
  try {
    GenerationDefaults d;
    chat ? server::parse_chat_request(body, d) : server::parse_completion_request(body, d);
  } catch (const RequestError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ServeRequest, DefaultsApplyAndFieldsOverride) {
  GenerationDefaults d;
  d.max_tokens = 7;
  d.sampler.temperature = 0.5f;
  d.sampler.top_k = 11;
  GenerationRequest r = server::parse_completion_request({{"prompt", "hi"}}, d);
  EXPECT_EQ(*r.prompt_text, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampler.temperature, 0.5f);
  EXPECT_EQ(r.sampler.top_k, 11);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());

  r = server::parse_completion_request({{"prompt", {1, 2, 3}},
                                        {"n_predict", 3},
                                        {"temperature", 0},
                                        {"top_p", 0.5},
                                        {"top_k", 0},
                                        {"min_p", 0.25},
                                        {"seed", 99},
                                        {"stop", "\n"},
                                        {"stream", true}},
                                       d);
  EXPECT_EQ(*r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_FLOAT_EQ(r.sampler.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.sampler.top_p, 0.5f);
  EXPECT_EQ(r.sampler.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampler.min_p, 0.25f);
  EXPECT_EQ(r.sampler.seed, 99u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stream);
  // max_tokens wins over n_predict when both come (it is read last); 5.0 is an integer.
  r = server::parse_completion_request({{"prompt", {"one"}}, {"n_predict", 3}, {"max_tokens", 5.0}, {"seed", -1}}, d);
  EXPECT_EQ(*r.prompt_text, "one");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_TRUE(r.random_seed);
}

TEST(ServeRequest, BadFieldsNameTheField) {
  EXPECT_EQ(parse_error(json::array()), "the request body must be a JSON object");
  EXPECT_EQ(parse_error({{"max_tokens", 3}}), "'prompt' is required");
  EXPECT_EQ(parse_error({{"prompt", {{"a", 1}}}}), "'prompt' must be a string or a non-empty array of token ids");
  EXPECT_EQ(parse_error({{"prompt", json::array()}}), "'prompt' must be a string or a non-empty array of token ids");
  EXPECT_EQ(parse_error({{"prompt", {1, "x"}}}),
            "'prompt' must be a string or an array of token ids (one prompt per request)");
  EXPECT_EQ(parse_error({{"prompt", {1, -2}}}), "'prompt' has a token id out of range: -2");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"temperature", "hot"}}), "'temperature' must be a number");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"temperature", -1}}), "'temperature' must be >= 0 (0 = greedy)");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"top_p", 0}}), "'top_p' must be in (0, 1]");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"min_p", 1.5}}), "'min_p' must be in [0, 1]");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"top_k", 2.5}}), "'top_k' must be an integer");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"max_tokens", "5"}}), "'max_tokens' must be an integer");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"max_tokens", -2}}),
            "'max_tokens' must be -1 (until the context is full) or a count >= 0");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"seed", -5}}), "'seed' must be >= 0, or -1 for a random seed");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"stop", 5}}), "'stop' must be a string or an array of strings");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"stop", {"a", 1}}}), "'stop' must be a string or an array of strings");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"stop", ""}}), "'stop' strings must not be empty");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"stop", std::vector<std::string>(17, "a")}}),
            "'stop' has more than 16 strings");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"stream", "yes"}}), "'stream' must be a boolean");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"n", 0}}), "'n' is 0; it must be 1..16");
  EXPECT_EQ(parse_error({{"prompt", "x"}}, true), "'messages' must be a non-empty array");
  EXPECT_EQ(parse_error({{"messages", {{{"content", "x"}}}}}, true), "each message needs a string 'role'");
  EXPECT_EQ(parse_error({{"messages", {{{"role", "user"}, {"content", 3}}}}}, true),
            "a message's 'content' must be a string, an array of parts, or null");
  EXPECT_EQ(parse_error({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", "t"}}, true),
            "'tools' must be an array");
}

TEST(ServeRequest, ResponseFormatAndToolChoice) {
  GenerationDefaults d;
  EXPECT_FALSE(server::parse_completion_request({{"prompt", "x"}}, d).json_object);
  EXPECT_FALSE(server::parse_completion_request({{"prompt", "x"}, {"response_format", {{"type", "text"}}}}, d).json_object);
  EXPECT_TRUE(server::parse_completion_request({{"prompt", "x"}, {"response_format", {{"type", "json_object"}}}}, d).json_object);
  // json_schema without a schema: any one object.
  EXPECT_TRUE(server::parse_completion_request(
                  {{"prompt", "x"}, {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}}}}}}, d)
                  .json_object);
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"response_format", "json"}}),
            "'response_format' must be an object with a string 'type' (\"text\", \"json_object\" or \"json_schema\")");
  EXPECT_EQ(parse_error({{"prompt", "x"}, {"response_format", {{"type", "xml"}}}}),
            "'response_format': unknown type \"xml\" (expected \"text\", \"json_object\" or \"json_schema\")");

  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  const json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}}};
  EXPECT_EQ(server::parse_chat_request({{"messages", msgs}, {"tools", tools}}, d).tools, tools);
  EXPECT_EQ(server::parse_chat_request({{"messages", msgs}, {"tools", tools}, {"tool_choice", "auto"}}, d).tools, tools);
  EXPECT_TRUE(server::parse_chat_request({{"messages", msgs}, {"tools", tools}, {"tool_choice", "none"}}, d).tools.is_null());
  EXPECT_EQ(parse_error({{"messages", msgs}, {"tool_choice", "required"}}, true),
            "'tool_choice' forces a call, but 'tools' is empty or absent");
  EXPECT_EQ(parse_error({{"messages", msgs}, {"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}, true),
            "'tool_choice' names the function \"g\", which is not in 'tools'");
  EXPECT_TRUE(server::parse_chat_request({{"messages", msgs}, {"tools", tools}, {"tool_choice", "required"}}, d).force_tool_call);
  EXPECT_EQ(parse_error({{"messages", msgs}, {"tool_choice", "sometimes"}}, true),
            "'tool_choice' must be \"auto\", \"none\" or \"required\" (got \"sometimes\")");
  EXPECT_EQ(parse_error({{"messages", msgs}, {"tool_choice", 3}}, true),
            "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}");
}

// ---- text stream -----------------------------------------------------------

// Pushes pieces one by one; returns the concatenated output.
std::string run_stream(runtime::TextStream& ts, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    out += ts.push(p);
    if (ts.stopped()) return out;
  }
  return out + ts.finish();
}

TEST(ServeTextStream, StopStringSplitAcrossPiecesIsCutAndNotEmitted) {
  runtime::TextStream ts({"END"});
  EXPECT_EQ(ts.push("abc E"), "abc ");  // "E" could start "END": held back
  EXPECT_EQ(ts.push("N"), "");
  EXPECT_EQ(ts.push("Dxyz"), "");
  EXPECT_TRUE(ts.stopped());
  EXPECT_EQ(ts.finish(), "");

  runtime::TextStream miss({"END"});
  EXPECT_EQ(run_stream(miss, {"a E", "Nd", "!"}), "a ENd!");  // a near-miss is released
  EXPECT_FALSE(miss.stopped());

  runtime::TextStream earliest({"yz", "b"});  // the first occurrence of any stop string wins
  EXPECT_EQ(run_stream(earliest, {"xa", "byz"}), "xa");
}

TEST(ServeTextStream, EmptyStopStringsAreIgnored) {
  runtime::TextStream none({""});
  EXPECT_EQ(run_stream(none, {"a", "b"}), "ab");
  EXPECT_FALSE(none.stopped());
}

TEST(ServeTextStream, HoldsBackIncompleteUtf8) {
  runtime::TextStream ts({});
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  EXPECT_EQ(ts.push("a" + euro.substr(0, 1)), "a");
  EXPECT_EQ(ts.push(euro.substr(1, 1)), "");
  EXPECT_EQ(ts.push(euro.substr(2)), euro);
  EXPECT_EQ(runtime::incomplete_utf8_tail("x\xF0\x9F"), 2u);
  EXPECT_EQ(runtime::incomplete_utf8_tail("x" + euro), 0u);
}

// ---- chat deltas -------------------------------------------------------------

TEST(ServeResponse, ChatStreamsReasoningContentAndIndexedCallsAsTheyAreDecided) {
  server::ResponseInfo info;
  info.id = "chatcmpl-1";
  info.model = "m";
  info.chat = true;
  info.format = chat_output::OutputFormat::Think;
  server::ResponseBuilder b(info);
  // Each event's delta.
  auto deltas = [](const std::vector<json>& events) {
    std::vector<json> out;
    for (const json& e : events) {
      EXPECT_EQ(e["object"], "chat.completion.chunk");
      EXPECT_TRUE(e["choices"][0]["finish_reason"].is_null());
      out.push_back(e["choices"][0]["delta"]);
    }
    return out;
  };
  EXPECT_EQ(deltas(b.stream_start()), std::vector<json>{json({{"role", "assistant"}, {"content", ""}})});
  EXPECT_EQ(deltas(b.stream_text("<think>Let me")), std::vector<json>{json({{"reasoning_content", "Let me"}})});
  EXPECT_EQ(deltas(b.stream_text(" see</think>\nIt is")),
            (std::vector<json>{{{"reasoning_content", " see"}}, {{"content", "It is"}}}));
  EXPECT_EQ(deltas(b.stream_text(" <tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call><tool_call>")),
            (std::vector<json>{{{"tool_calls",
                                 {{{"id", "call_0"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", R"({"x":1})"}}},
                                   {"index", 0}}}}}}));
  const std::vector<json> second = deltas(b.stream_text("{\"name\": \"g\"}</tool_call> "));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(second[0]["tool_calls"][0]["id"], "call_1");
  server::GenerationResult g;
  g.finish_reason = "length";
  g.text = "<think>Let me see</think>\nIt is <tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>"
           "<tool_call>{\"name\": \"g\"}</tool_call> ";
  g.prompt_tokens = 5;
  g.completion_tokens = 9;
  const std::vector<json> end = b.stream_end(g);  // the trailing space is trimmed: only the last chunk
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0]["choices"][0]["delta"], json::object());
  EXPECT_EQ(end[0]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(end[0]["usage"]["total_tokens"], 14);
  // The whole response of the same text: the same split.
  const json whole = b.whole(g);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
  const json& m = whole["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "Let me see");
  EXPECT_EQ(m["content"], "It is");
  ASSERT_EQ(m["tool_calls"].size(), 2u);
  EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "g");
  EXPECT_FALSE(m["tool_calls"][0].contains("index"));
}

// ---- the live server -------------------------------------------------------

// The live server and the raw-socket helpers: serve_test_support.h.
using test::connect_to;
using test::LiveServer;
using test::model_path;
using test::plain_config;
using test::send_all;

TEST(ServeSession, RewindKeepsAPrefix) {
  model::ModelConfig mc;
  mc.odirect = false;
  runtime::Session s = runtime::Session::open(model_path(), mc);
  const std::vector<int32_t> a = {1, 400, 401, 402, 403};
  std::vector<float> want;
  {
    auto row = s.feed(a);
    want.assign(row.begin(), row.end());
  }
  s.feed(std::vector<int32_t>{7, 8});
  EXPECT_EQ(s.common_prefix(std::vector<int32_t>{1, 400, 9}), 2u);
  s.rewind(2);
  EXPECT_EQ(s.tokens(), (std::vector<int32_t>{1, 400}));
  auto row = s.feed(std::vector<int32_t>{401, 402, 403});  // rewinds over the stale rows
  EXPECT_EQ(std::vector<float>(row.begin(), row.end()), want);
  s.rewind(9);  // past the history: nothing to drop
  EXPECT_EQ(s.tokens().size(), 5u);
}

class ServeLive : public ::testing::Test {
 public:
  static void SetUpTestSuite() { live = new LiveServer(plain_config()); }
  static void TearDownTestSuite() {
    delete live;
    live = nullptr;
  }
  static LiveServer* live;

  // POSTs `body` and returns (status, parsed JSON body).
  static std::pair<int, json> post(const std::string& path, const std::string& body) {
    auto res = live->client().Post(path.c_str(), body, "application/json");
    if (!res) return {-1, json()};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  static json completion(const json& body) {
    auto [status, j] = post("/v1/completions", body.dump());
    EXPECT_EQ(status, 200) << j.dump();
    return j;
  }
};
LiveServer* ServeLive::live = nullptr;

// The `data:` payloads of an SSE body, checking the framing: every event is
// exactly "data: PAYLOAD\n\n".
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event at " << pos;
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    EXPECT_EQ(ev.find('\n'), std::string::npos) << ev;
    out.push_back(ev.substr(6));
    pos = end + 2;
  }
  return out;
}

// Streams a completion; returns the concatenated text and the final chunk.
std::pair<std::string, json> stream_text(const std::string& path, json body, bool chat = false) {
  body["stream"] = true;
  auto res = ServeLive::live->client().Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return {};
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> events = sse_payloads(res->body);
  EXPECT_GE(events.size(), 2u);
  if (events.size() < 2) return {};
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  json last;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    last = json::parse(events[i]);
    const json& c = last["choices"][0];
    if (i + 2 < events.size()) {
      EXPECT_TRUE(c["finish_reason"].is_null()) << events[i];
    }
    if (chat) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      EXPECT_EQ(last["object"], "chat.completion.chunk");
    } else {
      text += c["text"].get<std::string>();
      EXPECT_EQ(last["object"], "text_completion");
    }
  }
  return {text, last};
}

TEST_F(ServeLive, HealthAndModels) {
  auto c = live->client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}}));
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  const json j = json::parse(m->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "stories");
  EXPECT_EQ(j["data"][0]["meta"]["n_ctx"], live->session->model().n_ctx());
}

TEST_F(ServeLive, CompletionMatchesTheSessionAndStreamingMatchesNonStreaming) {
  const json j = completion({{"prompt", "Once upon a time"}, {"max_tokens", 12}});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  const std::vector<int32_t> prompt = tokenizer::Tokenizer::from_gguf(live->session->gguf().metadata()).encode("Once upon a time", true, false);
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
  const std::string text = j["choices"][0]["text"];
  EXPECT_FALSE(text.empty());

  auto [streamed, last] = stream_text("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 12}});
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["usage"]["completion_tokens"], 12);

  // Sampled with a seed: the same text every time, streamed or not.
  const json sampled = {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 1.0}, {"seed", 7}};
  const std::string s1 = completion(sampled)["choices"][0]["text"];
  EXPECT_EQ(completion(sampled)["choices"][0]["text"], s1);
  EXPECT_EQ(stream_text("/v1/completions", sampled).first, s1);

  // A token-id prompt is the same prompt.
  json ids_body = {{"prompt", prompt}, {"max_tokens", 12}};
  EXPECT_EQ(completion(ids_body)["choices"][0]["text"], text);
}

// A JSON-constrained answer: a whole object when it stopped, else (cut by
// max_tokens) a valid prefix of one that used every token it was allowed.
void expect_json_answer(const std::string& text, const std::string& finish, int completion_tokens, int max_tokens) {
  grammar::JsonPrefix p;
  EXPECT_TRUE(p.push(text)) << text;
  if (finish == "stop") {
    EXPECT_TRUE(p.complete()) << text;
    const json j = json::parse(text, nullptr, false);
    EXPECT_TRUE(j.is_object()) << text;
  } else {
    EXPECT_EQ(finish, "length") << text;
    EXPECT_FALSE(p.complete()) << text;
    EXPECT_EQ(completion_tokens, max_tokens) << text;
  }
}

TEST_F(ServeLive, ResponseFormatJsonObjectGivesOneObjectStreamedOrNot) {
  int stopped = 0;
  for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 1.0}, {"seed", 3}},
                               json{{"temperature", 1.0}, {"seed", 11}, {"top_k", 0}, {"top_p", 1.0}, {"min_p", 0}}}) {
    json body = {{"prompt", "The answer as JSON:"}, {"max_tokens", 64}, {"response_format", {{"type", "json_object"}}}};
    body.update(sampling);
    const json j = completion(body);
    const std::string text = j["choices"][0]["text"];
    const std::string finish = j["choices"][0]["finish_reason"];
    expect_json_answer(text, finish, j["usage"]["completion_tokens"], 64);
    EXPECT_FALSE(j.contains("notice")) << j.dump();
    stopped += finish == "stop";
    // Streamed: the same text and finish.
    auto [streamed, last] = stream_text("/v1/completions", body);
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(last["choices"][0]["finish_reason"], finish);
  }
  // Unconstrained, the same greedy request is not JSON at all.
  const std::string free_text =
      completion({{"prompt", "The answer as JSON:"}, {"max_tokens", 12}})["choices"][0]["text"];
  grammar::JsonPrefix p;
  EXPECT_FALSE(p.push(free_text)) << free_text;
  std::cout << "[ json_object ] " << stopped << " of 3 answers completed an object within 64 tokens\n";
}

TEST_F(ServeLive, RepeatedPromptReusesTheKvPrefix) {
  const json body = {{"prompt", "One day, a little bird flew over the river"}, {"max_tokens", 4}};
  completion({{"prompt", "Something else entirely"}, {"max_tokens", 2}});
  const json first = completion(body);
  const auto& recs = live->session->telemetry().records();
  auto last_prefill = [&] {
    for (auto it = recs.rbegin(); it != recs.rend(); ++it)
      if (it->kind == telemetry::EvalKind::Prefill) return it->n_tokens;
    return -1;
  };
  const int n_prompt = first["usage"]["prompt_tokens"];
  ASSERT_GT(n_prompt, 4);
  const int cached_first = first["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(last_prefill(), n_prompt - cached_first);  // only BOS can be shared with the other prompt
  EXPECT_LE(cached_first, 1);

  const json second = completion(body);
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], n_prompt - 1);
  EXPECT_EQ(last_prefill(), 1);  // the last prompt token is evaluated again for its logits
  EXPECT_EQ(second["choices"][0]["text"], first["choices"][0]["text"]);  // reuse changes nothing
}

TEST_F(ServeLive, StopStringsCutTheTextStreamedOrNot) {
  const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 24}};
  const std::string full = completion(base)["choices"][0]["text"];
  ASSERT_GT(full.size(), 12u);
  const std::string stop = full.substr(8, 4);  // a stop string known to occur
  const std::string want = full.substr(0, full.find(stop));
  json with_stop = base;
  with_stop["stop"] = {"\x01never", stop};
  const json j = completion(with_stop);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  auto [streamed, last] = stream_text("/v1/completions", with_stop);
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServeLive, BadRequestsAreJsonErrors) {
  auto expect_error = [](const std::string& path, const std::string& body, int status, const std::string& has) {
    auto [st, j] = post(path, body);
    EXPECT_EQ(st, status) << body;
    ASSERT_TRUE(j.is_object()) << body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(has), std::string::npos) << j.dump();
    EXPECT_EQ(j["error"]["type"], status == 501 ? "not_supported_error" : "invalid_request_error");
  };
  expect_error("/v1/completions", "{\"prompt\": ", 400, "not valid JSON");
  expect_error("/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400, "'temperature' must be a number");
  expect_error("/v1/completions", R"({"prompt": "x", "stop": 3})", 400, "'stop'");
  expect_error("/v1/completions", R"({"prompt": [1, 100000]})", 400, "outside the vocabulary");
  const int n_ctx = live->session->model().n_ctx();
  expect_error("/v1/completions", json({{"prompt", std::vector<int>(n_ctx, 5)}}).dump(), 400, "the context holds");
  std::string long_text;
  for (int i = 0; i < n_ctx; ++i) long_text += "the cat ";
  expect_error("/v1/completions", json({{"prompt", long_text}}).dump(), 400, "the context holds");
  {
    // A body over the 8 MiB limit. Sent from a thread while the answer is
    // read here: the server answers before taking it all, and the upload
    // may then fail (ignored).
    const int fd = connect_to(live->port);
    ASSERT_GE(fd, 0);
    const size_t body_bytes = 9u << 20;
    std::thread upload([fd, body_bytes] {
      send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: " + std::to_string(body_bytes) + "\r\n\r\n" + std::string(body_bytes, ' '));
    });
    std::string got;
    char buf[512];
    // Until the JSON error is complete or the server closes.
    while (got.size() < 2 || got.compare(got.size() - 2, 2, "}}") != 0) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::shutdown(fd, SHUT_RDWR);  // ends a blocked upload
    upload.join();
    ::close(fd);
    EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
    EXPECT_NE(got.find(R"("type":"invalid_request_error")"), std::string::npos) << got;
    EXPECT_NE(got.find("too large"), std::string::npos) << got;
  }
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})", 501,
               "this build has no chat-template renderer");
  expect_error("/tokenize", R"({"content": 5})", 400, "'content' must be a string");
  expect_error("/detokenize", R"({"tokens": [-1]})", 400, "'tokens' must hold ids");
  auto nf = live->client().Get("/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ(json::parse(nf->body)["error"]["type"], "not_found_error");
  // Still serving.
  EXPECT_EQ(completion({{"prompt", "Once"}, {"max_tokens", 2}})["usage"]["completion_tokens"], 2);
}

TEST_F(ServeLive, TokenizeAndDetokenizeRoundTrip) {
  auto [st, t] = post("/tokenize", R"({"content": "Once upon a time"})");
  ASSERT_EQ(st, 200);
  const std::vector<int32_t> ids = t["tokens"];
  EXPECT_EQ(ids, tokenizer::Tokenizer::from_gguf(live->session->gguf().metadata()).encode("Once upon a time", false, true));
  auto [st2, d] = post("/detokenize", json({{"tokens", ids}}).dump());
  ASSERT_EQ(st2, 200);
  EXPECT_EQ(d["content"], "Once upon a time");
}

TEST_F(ServeLive, FiftyConcurrentClientsAreAllAnswered) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 6}};
  const std::string want = completion(body)["choices"][0]["text"];
  auto metric = [](const std::string& name) {
    auto m = live->client().Get("/metrics");
    EXPECT_TRUE(m);
    const std::string key = "\n" + name + " ";
    const size_t at = m->body.find(key);
    EXPECT_NE(at, std::string::npos) << name;
    return std::strtod(m->body.c_str() + at + key.size(), nullptr);
  };
  const double before = metric("sluice_requests_total");
  constexpr int kClients = 50;
  std::vector<std::thread> threads;
  std::vector<std::string> texts(kClients);
  std::vector<int> status(kClients, 0);
  std::vector<std::string> errors(kClients);
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto res = live->client().Post("/v1/completions", body.dump(), "application/json");
      if (!res) {
        errors[i] = httplib::to_string(res.error());
        return;
      }
      status[i] = res->status;
      texts[i] = json::parse(res->body)["choices"][0]["text"];
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(status[i], 200) << "client " << i << ": " << errors[i];
    EXPECT_EQ(texts[i], want) << "client " << i;
  }
  EXPECT_EQ(metric("sluice_requests_total"), before + kClients);
  EXPECT_EQ(metric("sluice_queue_depth"), 0);
  EXPECT_EQ(metric("sluice_busy"), 0);
  auto h = live->client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST_F(ServeLive, ClientGoneMidStreamCancelsAndTheServerCarriesOn) {
  auto metric = [](const std::string& name) {
    auto m = live->client().Get("/metrics");
    EXPECT_TRUE(m);
    const size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::strtod(m->body.c_str() + at + name.size() + 2, nullptr);
  };
  const double cancelled_before = metric("sluice_requests_cancelled_total");
  // A raw socket: send a streaming request for the whole context, read the
  // first bytes of the answer, then close with data unread (a reset).
  const int fd = connect_to(live->port);
  ASSERT_GE(fd, 0);
  const std::string body = json({{"prompt", "Once upon a time"}, {"max_tokens", -1}, {"stream", true}}).dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_TRUE(send_all(fd, req));
  std::string got;
  char buf[256];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  // The next request queues behind the abandoned one, so when it is answered
  // that one has ended, and it ended by cancellation (the context holds
  // ~500 tokens; the server notices the reset within two writes).
  const json j = completion({{"prompt", "Once upon a time"}, {"max_tokens", 3}});
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(metric("sluice_requests_cancelled_total"), cancelled_before + 1);
}

TEST_F(ServeLive, MetricsArePrometheusText) {
  completion({{"prompt", "Once upon a time"}, {"max_tokens", 3}});
  auto m = live->client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  for (const char* name : {"sluice_requests_total", "sluice_tokens_generated_total", "sluice_decode_tokens_per_second",
                           "sluice_decode_mib_read_per_token", "sluice_expert_cache_hit_percent",
                           "sluice_majflt_per_token", "sluice_queue_depth"}) {
    EXPECT_NE(m->body.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
    EXPECT_NE(m->body.find(std::string("\n") + name + " "), std::string::npos) << name;
  }
  // The token counters agree with the session's own summary.
  const telemetry::RunSummary s = live->session->summary();
  EXPECT_NE(m->body.find("\nsluice_decode_tokens_total " + std::to_string(s.decode_tokens) + "\n"), std::string::npos);
}

// A renderer that joins the contents: enough to test the endpoint's plumbing.
std::string join_contents(const json& messages, const json& tools, bool add_generation_prompt) {
  std::string s;
  for (const json& m : messages) s += m["content"].get<std::string>();
  return s;
}

TEST(ServeAuthAndChat, ApiKeyIsRequiredAndChatUsesTheInjectedRenderer) {
  server::ServerConfig cfg = plain_config();
  cfg.api_key = "sekret";
  cfg.chat_renderer = join_contents;
  LiveServer ls(cfg);
  // /health is open; everything else needs the key.
  auto h = ls.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (const std::string& key : {std::string(), std::string("wrong")}) {
    auto r = ls.client(key).Get("/v1/models");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  }
  auto ok = ls.client("sekret").Get("/v1/models");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);

  // Chat: the rendered text is the prompt, so the reply equals a completion of it.
  auto c = ls.client("sekret");
  const json chat = {{"messages", {{{"role", "system"}, {"content", "Once upon "}}, {{"role", "user"}, {"content", "a time"}}}},
                     {"max_tokens", 10}};
  auto r = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  auto r2 = c.Post("/v1/completions", json({{"prompt", "Once upon a time"}, {"max_tokens", 10}}).dump(), "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(j["choices"][0]["message"]["content"], json::parse(r2->body)["choices"][0]["text"]);

  json stream = chat;
  stream["stream"] = true;
  auto s = c.Post("/v1/chat/completions", stream.dump(), "application/json");
  ASSERT_TRUE(s);
  const std::vector<std::string> events = sse_payloads(s->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  std::string text;
  for (size_t i = 1; i + 2 < events.size(); ++i) text += json::parse(events[i])["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, j["choices"][0]["message"]["content"]);
  EXPECT_EQ(json::parse(events[events.size() - 2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events.back(), "[DONE]");

  // response_format on chat, streamed or not: the content is JSON.
  json jchat = chat;
  jchat["max_tokens"] = 40;
  jchat["response_format"] = {{"type", "json_object"}};
  auto jr = c.Post("/v1/chat/completions", jchat.dump(), "application/json");
  ASSERT_TRUE(jr);
  ASSERT_EQ(jr->status, 200) << jr->body;
  const json jj = json::parse(jr->body);
  const std::string content = jj["choices"][0]["message"]["content"];
  expect_json_answer(content, jj["choices"][0]["finish_reason"], jj["usage"]["completion_tokens"], 40);
  jchat["stream"] = true;
  auto js = c.Post("/v1/chat/completions", jchat.dump(), "application/json");
  ASSERT_TRUE(js);
  const std::vector<std::string> jevents = sse_payloads(js->body);
  ASSERT_GE(jevents.size(), 3u);
  std::string jtext;
  for (size_t i = 1; i + 2 < jevents.size(); ++i) {
    const json delta = json::parse(jevents[i])["choices"][0]["delta"];
    if (delta.contains("content")) jtext += delta["content"].get<std::string>();
  }
  EXPECT_EQ(jtext, content);
  EXPECT_EQ(json::parse(jevents[jevents.size() - 2])["choices"][0]["finish_reason"], jj["choices"][0]["finish_reason"]);
}

// tests/serve/openai_client.mjs with the official `openai` npm package, when
// node and the package are there (cd tests/serve && npm install openai).
TEST(ServeOpenAiClient, NodeClientStreamsAndCompletes) {
  const std::string dir = test::source_path("tests/serve");
  int rc = 0;
  test::run_cmd("cd '" + dir + "' && node -e \"import('openai').then(()=>process.exit(0),()=>process.exit(1))\" 2>/dev/null", &rc);
  if (rc != 0) GTEST_SKIP() << "node or the openai npm package is missing (cd tests/serve && npm install openai)";
  LiveServer ls(plain_config());
  const std::string out =
      test::run_cmd("cd '" + dir + "' && node openai_client.mjs http://127.0.0.1:" + std::to_string(ls.port) + "/v1 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("OPENAI_CLIENT_OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace SLUICE_TEST_FILE {

// `sluice serve` flag and bind errors: one message naming the flag or the
// address, exit status 1, before serving anything.
TEST(ServeCli, BadFlagsAndABusyPortAreOneMessage) {
  // `timeout`: a serve that wrongly starts must fail the test, not hang it.
  const std::string base = "timeout 60 " + std::string(SLUICE_BINARY) + " serve -m '" + model_path() + "' ";
  int rc = 0;
  std::string out = test::run_cmd(base + "--port 70000 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("sluice: error: --port: must be 0..65535 (got 70000)"), std::string::npos) << out;
  out = test::run_cmd(base + "--http-threads 0 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("sluice: error: --http-threads: must be 1..1024"), std::string::npos) << out;
  out = test::run_cmd(base + "--temp -1 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("sluice: error: --temp: must be a number >= 0"), std::string::npos) << out;

  LiveServer busy(plain_config());  // holds a port
  out = test::run_cmd(base + "--port " + std::to_string(busy.port) + " 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("sluice: error: serve: cannot listen on 127.0.0.1:" + std::to_string(busy.port)), std::string::npos)
      << out;
}

}  // namespace
}  // namespace sluice
