// response_format json_schema on `sluice serve`, enforced: greedy and
// sampled answers of the bundled stories model, streamed or not, parse and
// validate against their schema (tests/unit/json_schema_validator.h); a
// schema with a keyword sluice cannot enforce is a 400 naming it.
#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "json_schema_validator.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_prefix.h"
#include "serve_test_support.h"
#include "server/server.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;

struct JsonSchemaLive : ::testing::Test {
  static void SetUpTestSuite() {
    server::ServerConfig cfg = test::plain_config();
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
  static test::LiveServer* live;
};
test::LiveServer* JsonSchemaLive::live = nullptr;

const std::vector<json>& schemas() {
  static const std::vector<json> s = {
      {{"type", "object"},
       {"properties", {{"name", {{"type", "string"}}}, {"age", {{"type", "integer"}}}}},
       {"required", {"name", "age"}},
       {"additionalProperties", false}},
      {{"type", "object"},
       {"properties",
        {{"color", {{"enum", {"red", "green", "blue"}}}}, {"ok", {{"type", "boolean"}}}}},
       {"required", {"color", "ok"}},
       {"additionalProperties", false}},
      {{"type", "array"}, {"items", {{"type", "integer"}}}, {"minItems", 2}, {"maxItems", 4}},
      {{"type", "object"},
       {"properties",
        {{"x", {{"type", "number"}}}, {"unit", {{"const", "cm"}}}, {"note", {{"type", "null"}}}}},
       {"required", {"x", "unit", "note"}},
       {"additionalProperties", false}},
      {{"$defs",
        {{"point",
          {{"type", "object"},
           {"properties", {{"x", {{"type", "integer"}}}, {"y", {{"type", "integer"}}}}},
           {"required", {"x", "y"}},
           {"additionalProperties", false}}}}},
       {"type", "object"},
       {"properties",
        {{"at", {{"anyOf", {{{"$ref", "#/$defs/point"}}, {{"type", "null"}}}}}},
         {"path", {{"type", "array"}, {"items", {{"$ref", "#/$defs/point"}}}, {"maxItems", 2}}},
         {"kind", {{"oneOf", {{{"const", "a"}}, {{"const", "b"}}}}}}}},
       {"required", {"at", "path", "kind"}},
       {"additionalProperties", false}},
  };
  return s;
}

json post(const json& body) {
  auto r = JsonSchemaLive::live->client().Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

std::string streamed_text(json body) {
  body["stream"] = true;
  auto r = JsonSchemaLive::live->client().Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  std::string text;
  size_t pos = 0;
  while (true) {
    const size_t end = r->body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string payload = r->body.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") text += json::parse(payload)["choices"][0]["text"].get<std::string>();
    pos = end + 2;
  }
  return text;
}

TEST_F(JsonSchemaLive, GreedyAndSampledAnswersValidateStreamedOrNot) {
  constexpr int kMax = 96;
  int whole = 0, total = 0;
  for (size_t si = 0; si < schemas().size(); ++si) {
    const json& schema = schemas()[si];
    const auto compiled = grammar::JsonSchema::compile(schema);
    for (const json& sampling :
         {json{{"temperature", 0}}, json{{"temperature", 1.0}, {"seed", 3}},
          json{{"temperature", 1.0}, {"seed", 9}, {"top_k", 0}, {"top_p", 1.0}, {"min_p", 0}}}) {
      json body = {
          {"prompt", "Tom wrote the answer as JSON:"},
          {"max_tokens", kMax},
          {"response_format",
           {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", schema}}}}}};
      body.update(sampling);
      const json j = post(body);
      const std::string text = j["choices"][0]["text"];
      const std::string finish = j["choices"][0]["finish_reason"];
      EXPECT_FALSE(j.contains("notice")) << j.dump();
      ++total;
      if (finish == "stop") {
        ++whole;
        const json v = json::parse(text, nullptr, false);
        ASSERT_FALSE(v.is_discarded()) << "schema " << si << ": " << text;
        EXPECT_TRUE(test::validates(schema, v)) << "schema " << si << ": " << text;
      } else {
        // Cut by max_tokens: still a prefix of an accepted document.
        EXPECT_EQ(finish, "length") << text;
        EXPECT_EQ(j["usage"]["completion_tokens"], kMax);
        EXPECT_TRUE(grammar::SchemaPrefix::is_prefix(*compiled, text))
            << "schema " << si << ": " << text;
      }
      if (sampling["temperature"] == 0)
        std::cout << "[ json_schema " << si << " ] " << json(text).dump() << " "
                  << j["usage"].dump() << "\n";
      EXPECT_EQ(streamed_text(body), text);
    }
  }
  std::cout << "[ json_schema ] " << whole << " of " << total
            << " answers were whole documents within " << kMax << " tokens\n";
  EXPECT_GE(whole, total / 2);  // the constraint closes documents, not only keeps prefixes
}

TEST_F(JsonSchemaLive, AnUnsupportedKeywordIsA400NamingIt) {
  const json body = {
      {"prompt", "x"},
      {"response_format",
       {{"type", "json_schema"},
        {"json_schema", {{"name", "t"}, {"schema", {{"type", "string"}, {"format", "date"}}}}}}}};
  auto r = live->client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["message"],
            "'response_format.json_schema.schema': json_schema at /format: the keyword \"format\" "
            "is not supported "
            "(supported: type, enum, const, properties, required, additionalProperties, items, "
            "minItems, maxItems, "
            "anyOf, oneOf, $ref, $defs)");
}

const json kTools = {
    {{"type", "function"},
     {"function",
      {{"name", "get_weather"},
       {"parameters",
        {{"type", "object"},
         {"properties", {{"city", {{"type", "string"}}}, {"unit", {{"enum", {"c", "f"}}}}}},
         {"required", {"city", "unit"}},
         {"additionalProperties", false}}}}}},
    {{"type", "function"},
     {"function",
      {{"name", "add"},
       {"parameters",
        {{"type", "object"},
         {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}},
         {"required", {"a", "b"}},
         {"additionalProperties", false}}}}}}};

json tool_params(const std::string& name) {
  for (const json& t : kTools)
    if (t["function"]["name"] == name) return t["function"]["parameters"];
  return nullptr;
}

TEST_F(JsonSchemaLive, ForcedToolCallsAreValidCallsStreamedOrNot) {
  for (const json& choice :
       {json("required"), json{{"type", "function"}, {"function", {{"name", "add"}}}}}) {
    for (const json& sampling :
         {json{{"temperature", 0}}, json{{"temperature", 1.0}, {"seed", 4}}}) {
      json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time, Lily"}}}},
                   {"tools", kTools},
                   {"tool_choice", choice},
                   {"max_tokens", 256}};
      body.update(sampling);
      auto r = live->client().Post("/v1/chat/completions", body.dump(), "application/json");
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      const json j = json::parse(r->body);
      const json& c = j["choices"][0];
      ASSERT_EQ(c["finish_reason"], "tool_calls") << r->body;
      ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
      const json& fn = c["message"]["tool_calls"][0]["function"];
      if (choice.is_object()) {
        EXPECT_EQ(fn["name"], "add");
      }
      const json params = tool_params(fn["name"]);
      ASSERT_FALSE(params.is_null()) << fn.dump();
      EXPECT_TRUE(test::validates(params, json::parse(fn["arguments"].get<std::string>())))
          << fn.dump();
      // Streamed: the same call, in one delta.
      body["stream"] = true;
      auto s = live->client().Post("/v1/chat/completions", body.dump(), "application/json");
      ASSERT_TRUE(s);
      json calls = json::array();
      std::string finish;
      size_t pos = 0;
      while (true) {
        const size_t end = s->body.find("\n\n", pos);
        if (end == std::string::npos) break;
        const std::string payload = s->body.substr(pos + 6, end - pos - 6);
        pos = end + 2;
        if (payload == "[DONE]") continue;
        const json ev = json::parse(payload)["choices"][0];
        EXPECT_FALSE(ev["delta"].contains("content") && ev["delta"]["content"] != "") << payload;
        if (ev["delta"].contains("tool_calls")) calls.push_back(ev["delta"]["tool_calls"][0]);
        if (!ev["finish_reason"].is_null()) finish = ev["finish_reason"];
      }
      ASSERT_EQ(calls.size(), 1u);
      EXPECT_EQ(calls[0]["function"], fn);
      EXPECT_EQ(finish, "tool_calls");
    }
  }
}

TEST_F(JsonSchemaLive, ForcedToolCallRefusals) {
  auto status_and_message = [&](const json& body) {
    auto r = live->client().Post("/v1/chat/completions", body.dump(), "application/json");
    return r ? std::to_string(r->status) + " " +
                   json::parse(r->body)["error"]["message"].get<std::string>()
             : "";
  };
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  json bad_tools = kTools;
  bad_tools[1]["function"]["parameters"]["properties"]["a"]["minimum"] = 0;
  EXPECT_EQ(
      status_and_message({{"messages", msgs}, {"tools", bad_tools}, {"tool_choice", "required"}}),
      "400 'tools'[1].function.parameters: json_schema at /properties/a/minimum: the keyword "
      "\"minimum\" is not "
      "supported (supported: type, enum, const, properties, required, additionalProperties, items, "
      "minItems, "
      "maxItems, anyOf, oneOf, $ref, $defs)");
  EXPECT_EQ(status_and_message({{"messages", msgs},
                                {"tools", kTools},
                                {"tool_choice", "required"},
                                {"response_format", {{"type", "json_object"}}}}),
            "400 'tool_choice' that forces a call cannot be combined with 'response_format'");
}

}  // namespace
}  // namespace sluice
