// The other APIs of `sluice serve`: Anthropic /v1/messages, OpenAI
// /v1/responses (with previous_response_id), llama-server's /completion and
// /props, and /v1/embeddings' 501; each checked against /v1/completions of
// the same prompt (the injected renderer joins the messages' contents, so a
// chat prompt is a known text) over the bundled stories model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "json_schema_validator.h"
#include "serve_test_support.h"
#include "server/server.h"
#include "test_support.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;

struct ApisLive : ::testing::Test {
  static void SetUpTestSuite() {
    server::ServerConfig cfg = test::plain_config();
    cfg.api_key = "k";
    cfg.chat_renderer = [](const json& messages, const json&, bool) {
      std::string s;
      for (const json& m : messages) s += m["content"].get<std::string>();
      return s;
    };
    live = new test::LiveServer(cfg);
  }
  static void TearDownTestSuite() {
    delete live;
    live = nullptr;
  }
  // POST with the key as x-api-key (Anthropic's header) or Bearer.
  static std::pair<int, std::string> post(const std::string& path, const json& body,
                                          bool x_api_key = false) {
    httplib::Client c = live->client(x_api_key ? "" : "k");
    httplib::Headers h;
    if (x_api_key) h.emplace("x-api-key", "k");
    auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
    if (!r) return {0, ""};
    return {r->status, r->body};
  }
  // (event name, data) of a named-event SSE body.
  static std::vector<std::pair<std::string, json>> events(const std::string& body) {
    std::vector<std::pair<std::string, json>> out;
    size_t pos = 0;
    while (true) {
      const size_t end = body.find("\n\n", pos);
      if (end == std::string::npos) break;
      const std::string ev = body.substr(pos, end - pos);
      pos = end + 2;
      const size_t nl = ev.find('\n');
      EXPECT_EQ(ev.rfind("event: ", 0), 0u) << ev;
      if (nl == std::string::npos) continue;
      out.emplace_back(ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7)));
    }
    return out;
  }
  static std::string completion_text(const std::string& prompt, int n) {
    auto [st, b] = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", n}});
    EXPECT_EQ(st, 200) << b;
    return json::parse(b)["choices"][0]["text"];
  }
  static test::LiveServer* live;
};
test::LiveServer* ApisLive::live = nullptr;

TEST_F(ApisLive, AnthropicMessagesWholeAndStreamed) {
  const std::string expected = completion_text("Once upon a time", 12);
  const json body = {
      {"model", "stories"},
      {"system", "Once upon "},
      {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a time"}}}}}}},
      {"max_tokens", 12}};
  auto [st, b] = post("/v1/messages", body, true);
  ASSERT_EQ(st, 200) << b;
  const json j = json::parse(b);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["content"][0]["text"], expected);
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_EQ(j["usage"]["output_tokens"], 12);

  json sb = body;
  sb["stream"] = true;
  auto [st2, b2] = post("/v1/messages", sb, true);
  ASSERT_EQ(st2, 200);
  const auto ev = events(b2);
  ASSERT_GE(ev.size(), 5u);
  EXPECT_EQ(ev.front().first, "message_start");
  EXPECT_EQ(ev[1].first, "content_block_start");
  std::string text;
  for (const auto& [name, data] : ev) {
    EXPECT_EQ(data["type"], name);
    if (name == "content_block_delta") text += data["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(text, expected);
  EXPECT_EQ(ev[ev.size() - 2].first, "message_delta");
  EXPECT_EQ(ev[ev.size() - 2].second["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(ev.back().first, "message_stop");

  // stop_sequences, and max_tokens is required.
  json stop = body;
  stop["stop_sequences"] = {expected.substr(2, 3)};
  stop["max_tokens"] = 30;
  auto [st3, b3] = post("/v1/messages", stop, true);
  EXPECT_EQ(json::parse(b3)["stop_reason"], "stop_sequence") << b3;
  EXPECT_EQ(json::parse(b3)["stop_sequence"], expected.substr(2, 3));
  json no_max = body;
  no_max.erase("max_tokens");
  auto [st4, b4] = post("/v1/messages", no_max, true);
  EXPECT_EQ(st4, 400);
  EXPECT_EQ(json::parse(b4), json::parse(R"({"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "'max_tokens' is required"}})"));
  auto [st5, b5] = post("/v1/messages", body, false);  // Bearer works too
  EXPECT_EQ(st5, 200);
}

TEST_F(ApisLive, AnthropicToolUseIsForcedWithToolChoiceAny) {
  const json tools = {
      {{"name", "add"},
       {"description", "adds"},
       {"input_schema",
        {{"type", "object"},
         {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}},
         {"required", {"a", "b"}},
         {"additionalProperties", false}}}}};
  const json body = {{"messages", {{{"role", "user"}, {"content", "Lily had"}}}},
                     {"tools", tools},
                     {"tool_choice", {{"type", "any"}}},
                     {"max_tokens", 256}};
  auto [st, b] = post("/v1/messages", body, true);
  ASSERT_EQ(st, 200) << b;
  const json j = json::parse(b);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "tool_use");
  EXPECT_EQ(j["content"][0]["name"], "add");
  EXPECT_TRUE(test::validates(tools[0]["input_schema"], j["content"][0]["input"])) << b;
  json sb = body;
  sb["stream"] = true;
  auto [st2, b2] = post("/v1/messages", sb, true);
  std::string partial;
  for (const auto& [name, data] : events(b2))
    if (name == "content_block_delta") partial += data["delta"]["partial_json"].get<std::string>();
  EXPECT_EQ(json::parse(partial), j["content"][0]["input"]);
}

TEST_F(ApisLive, ResponsesWholeStreamedAndChained) {
  const std::string expected = completion_text("Once upon a time", 10);
  const json body = {
      {"input", "a time"}, {"instructions", "Once upon "}, {"max_output_tokens", 10}};
  auto [st, b] = post("/v1/responses", body);
  ASSERT_EQ(st, 200) << b;
  const json j = json::parse(b);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(j["output"].size(), 1u);
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], expected);
  EXPECT_EQ(j["usage"]["output_tokens"], 10);

  json sb = body;
  sb["stream"] = true;
  auto [st2, b2] = post("/v1/responses", sb);
  const auto ev = events(b2);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0].first, "response.created");
  std::string text;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].second["type"], ev[i].first);
    EXPECT_EQ(ev[i].second["sequence_number"], i);
    if (ev[i].first == "response.output_text.delta")
      text += ev[i].second["delta"].get<std::string>();
  }
  EXPECT_EQ(text, expected);
  EXPECT_EQ(ev.back().first, "response.incomplete");
  EXPECT_EQ(ev.back().second["response"]["output"][0]["content"][0]["text"], expected);

  // Chained: the stored conversation ("a time" + answer) comes before the new input.
  const json second = {
      {"input", " The end"}, {"previous_response_id", j["id"]}, {"max_output_tokens", 5}};
  auto [st3, b3] = post("/v1/responses", second);
  ASSERT_EQ(st3, 200) << b3;
  EXPECT_EQ(json::parse(b3)["output"][0]["content"][0]["text"],
            completion_text("a time" + expected + " The end", 5));
  EXPECT_EQ(json::parse(b3)["previous_response_id"], j["id"]);
  auto [st4, b4] = post("/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_nope"}});
  EXPECT_EQ(st4, 400);
  EXPECT_EQ(json::parse(b4)["error"]["message"],
            "'previous_response_id': no stored response \"resp_nope\" (unknown, or dropped: the "
            "last 256 are kept, in memory)");
}

TEST_F(ApisLive, ResponsesJsonSchemaAndForcedFunctionCall) {
  const json schema = {{"type", "object"},
                       {"properties", {{"ok", {{"type", "boolean"}}}}},
                       {"required", {"ok"}},
                       {"additionalProperties", false}};
  auto [st, b] =
      post("/v1/responses",
           {{"input", "JSON:"},
            {"max_output_tokens", 256},
            {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", schema}}}}}});
  ASSERT_EQ(st, 200) << b;
  const json out =
      json::parse(json::parse(b)["output"][0]["content"][0]["text"].get<std::string>());
  EXPECT_TRUE(test::validates(schema, out)) << b;

  const json tools = {{{"type", "function"}, {"name", "add"}, {"parameters", schema}}};
  auto [st2, b2] = post("/v1/responses", {{"input", "Lily"},
                                          {"tools", tools},
                                          {"tool_choice", "required"},
                                          {"max_output_tokens", 256}});
  ASSERT_EQ(st2, 200) << b2;
  const json j2 = json::parse(b2);
  ASSERT_EQ(j2["output"].size(), 1u);
  EXPECT_EQ(j2["output"][0]["type"], "function_call");
  EXPECT_EQ(j2["output"][0]["name"], "add");
  EXPECT_TRUE(
      test::validates(schema, json::parse(j2["output"][0]["arguments"].get<std::string>())));
}

TEST_F(ApisLive, LlamaServerCompletionPropsAndEmbeddings) {
  const std::string expected = completion_text("Once upon a time", 8);
  auto [st, b] = post("/completion", {{"prompt", "Once upon a time"}, {"n_predict", 8}});
  ASSERT_EQ(st, 200) << b;
  const json j = json::parse(b);
  EXPECT_EQ(j["content"], expected);
  EXPECT_EQ(j["stop"], true);
  EXPECT_EQ(j["tokens_predicted"], 8);
  EXPECT_EQ(j["stopped_limit"], true);
  auto [st2, b2] =
      post("/completion", {{"prompt", "Once upon a time"}, {"n_predict", 8}, {"stream", true}});
  std::string text;
  json last;
  size_t pos = 0;
  while (true) {
    const size_t end = b2.find("\n\n", pos);
    if (end == std::string::npos) break;
    last = json::parse(b2.substr(pos + 6, end - pos - 6));
    text += last["content"].get<std::string>();
    pos = end + 2;
  }
  EXPECT_EQ(text, expected);
  EXPECT_EQ(last["stop"], true);
  auto p = live->client("k").Get("/props");
  ASSERT_TRUE(p);
  EXPECT_EQ(json::parse(p->body)["default_generation_settings"]["n_ctx"],
            live->session->model().n_ctx());
  auto [st3, b3] = post("/v1/embeddings", {{"input", "x"}});
  EXPECT_EQ(st3, 501);
  EXPECT_EQ(json::parse(b3)["error"]["message"],
            "embeddings are not implemented: sluice serves generation only");
}

// tests/serve/apis_clients.mjs with the latest `openai` and
// `@anthropic-ai/sdk` npm packages, when node and both are installed.
TEST_F(ApisLive, OfficialNodeClientsDriveEveryEndpoint) {
  const std::string dir = test::source_path("tests/serve");
  int rc = 0;
  test::run_cmd("cd '" + dir +
                    "' && node -e \"Promise.all([import('openai'), import('@anthropic-ai/sdk')])"
                    ".then(()=>process.exit(0),()=>process.exit(1))\" 2>/dev/null",
                &rc);
  if (rc != 0)
    GTEST_SKIP() << "node or the openai / @anthropic-ai/sdk npm packages are missing "
                    "(cd tests/serve && npm install openai @anthropic-ai/sdk)";
  const std::string out =
      test::run_cmd("cd '" + dir + "' && timeout 300 node apis_clients.mjs http://127.0.0.1:" +
                        std::to_string(live->port) + " k 2>&1",
                    &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("APIS_CLIENTS_OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace sluice
