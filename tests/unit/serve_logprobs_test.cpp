// `logprobs` on /v1/completions and /v1/chat/completions: the values are the
// log-softmax of the model's logits for the sampled tokens, checked against
// the `sluice logits` binary on the same tokens, within 1e-5; streamed responses carry the same
// entries as whole ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/logprobs.h"
#include "serve_test_support.h"
#include "server/engine.h"
#include "server/request.h"
#include "test_support.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using nlohmann::json;
using test::LiveServer;

// log_softmax(row)[id], computed here independently of runtime/logprobs.cpp.
double reference_logprob(const std::vector<float>& row, int32_t id) {
  double mx = row[0];
  for (float v : row) mx = std::max(mx, static_cast<double>(v));
  double s = 0;
  for (float v : row) s += std::exp(v - mx);
  return row[static_cast<size_t>(id)] - mx - std::log(s);
}

std::string join_contents(const json& messages, const json&, bool) {
  std::string s;
  for (const json& m : messages) s += m["content"].get<std::string>();
  return s;
}

struct LogprobsFixture : ::testing::Test {
  static void SetUpTestSuite() {
    server::ServerConfig cfg = test::plain_config();
    cfg.chat_renderer = join_contents;
    live = new LiveServer(cfg);
  }
  static void TearDownTestSuite() {
    delete live;
    live = nullptr;
  }
  static json post(const std::string& path, const json& body) {
    auto r = live->client().Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
  // The JSON payloads of a streamed response, [DONE] dropped.
  static std::vector<json> stream(const std::string& path, json body) {
    body["stream"] = true;
    auto r = live->client().Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    std::vector<json> out;
    if (!r) return out;
    size_t pos = 0;
    while (true) {
      const size_t end = r->body.find("\n\n", pos);
      if (end == std::string::npos) break;
      const std::string payload = r->body.substr(pos + 6, end - pos - 6);
      if (payload != "[DONE]") out.push_back(json::parse(payload));
      pos = end + 2;
    }
    return out;
  }
  static LiveServer* live;
};
LiveServer* LogprobsFixture::live = nullptr;

TEST(ServeLogprobsRequest, FieldsParseAndBadOnesNameTheField) {
  server::GenerationDefaults d;
  EXPECT_EQ(server::parse_completion_request({{"prompt", "a"}}, d).logprobs, -1);
  EXPECT_EQ(server::parse_completion_request({{"prompt", "a"}, {"logprobs", 3}}, d).logprobs, 3);
  EXPECT_EQ(server::parse_completion_request({{"prompt", "a"}, {"logprobs", 0}}, d).logprobs, 0);
  EXPECT_EQ(server::parse_completion_request({{"prompt", "a"}, {"n_probs", 0}}, d).logprobs, -1);
  EXPECT_EQ(server::parse_completion_request({{"prompt", "a"}, {"n_probs", 2}}, d).logprobs, 2);
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(server::parse_chat_request({{"messages", msgs}, {"logprobs", true}}, d).logprobs, 0);
  EXPECT_EQ(
      server::parse_chat_request({{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 20}}, d)
          .logprobs,
      20);
  EXPECT_EQ(server::parse_chat_request({{"messages", msgs}, {"logprobs", false}}, d).logprobs, -1);
  auto error = [&](const json& body, bool chat) -> std::string {
    try {
      chat ? server::parse_chat_request(body, d) : server::parse_completion_request(body, d);
    } catch (const server::RequestError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error({{"prompt", "a"}, {"logprobs", 21}}, false), "'logprobs' must be 0..20");
  EXPECT_EQ(error({{"prompt", "a"}, {"logprobs", -1}}, false), "'logprobs' must be 0..20");
  EXPECT_EQ(error({{"messages", msgs}, {"top_logprobs", 2}}, true),
            "'top_logprobs' needs 'logprobs': true");
  EXPECT_EQ(error({{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 21}}, true),
            "'top_logprobs' must be 0..20");
  EXPECT_EQ(error({{"messages", msgs}, {"logprobs", 2}}, true),
            "'logprobs' must be a boolean (chat; the count goes in 'top_logprobs')");
}

TEST(ServeLogprobs, TopTokensAreTheBestInOrder) {
  const std::vector<float> row = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  const runtime::TokenLogprob t = runtime::token_logprob(row, 4, 3);
  EXPECT_NEAR(t.logprob, reference_logprob(row, 4), 1e-6);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].first, 1);  // ties: lower id first
  EXPECT_EQ(t.top[1].first, 3);
  EXPECT_EQ(t.top[2].first, 4);
  EXPECT_NEAR(t.top[0].second, reference_logprob(row, 1), 1e-6);
  EXPECT_EQ(runtime::token_logprob(row, 0, 0).top.size(), 0u);
  EXPECT_EQ(runtime::token_logprob(row, 0, 20).top.size(), 5u);  // at most the vocabulary
}

// The engine's entries for a greedy and a sampled generation match the
// log-softmax of eval_all's rows over prompt + generated tokens.
TEST_F(LogprobsFixture, ValuesMatchTheLogitsOfTheSameTokens) {
  server::Engine& engine = live->srv->engine();
  for (const json& sampling : {json{{"temperature", 0}}, json{{"temperature", 1.0}, {"seed", 5}}}) {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"logprobs", 4}};
    body.update(sampling);
    const server::GenerationRequest r =
        server::parse_completion_request(body, server::GenerationDefaults{});
    const std::vector<int32_t> prompt = engine.tokenize_prompt(r);
    int streamed = 0;
    const server::GenerationResult g = engine.generate(
        r, prompt, [](const std::string&) { return true; },
        [&](const runtime::TokenLogprob&) { ++streamed; });
    ASSERT_EQ(g.logprobs.size(), 10u);
    EXPECT_EQ(streamed, 10);

    // The reference: `sluice logits` on prompt + generated tokens (the last
    // token's row is the one before it).
    std::vector<int32_t> all = prompt;
    for (const runtime::TokenLogprob& t : g.logprobs) all.push_back(t.id);
    all.pop_back();
    std::string list;
    for (int32_t id : all) list += (list.empty() ? "" : ",") + std::to_string(id);
    const std::string out = ::testing::TempDir() + "/serve_logprobs.f32";
    int rc = 0;
    const std::string log =
        test::run_cmd(std::string(SLUICE_BINARY) + " logits -m '" + test::model_path() +
                          "' --tokens " + list + " -o '" + out + "' 2>&1",
                      &rc);
    ASSERT_EQ(rc, 0) << log;
    const size_t n_vocab = static_cast<size_t>(engine.tokenizer().n_vocab());
    std::vector<float> logits(all.size() * n_vocab);
    std::ifstream f(out, std::ios::binary);
    ASSERT_TRUE(f.read(reinterpret_cast<char*>(logits.data()),
                       static_cast<std::streamsize>(logits.size() * 4)));
    std::remove(out.c_str());
    for (size_t i = 0; i < g.logprobs.size(); ++i) {
      const size_t row_i = prompt.size() - 1 + i;
      const std::vector<float> row(logits.begin() + row_i * n_vocab,
                                   logits.begin() + (row_i + 1) * n_vocab);
      const runtime::TokenLogprob& t = g.logprobs[i];
      EXPECT_NEAR(t.logprob, reference_logprob(row, t.id), 1e-5) << "token " << i;
      ASSERT_EQ(t.top.size(), 4u);
      for (const auto& [id, lp] : t.top) EXPECT_NEAR(lp, reference_logprob(row, id), 1e-5);
      EXPECT_GE(t.top[0].second, t.top[3].second);
      if (sampling["temperature"] == 0) {
        EXPECT_EQ(t.top[0].first, t.id);  // greedy: the best token
      }
    }
  }
}

TEST_F(LogprobsFixture, CompletionShapeStreamedOrNot) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"logprobs", 2}};
  const json j = post("/v1/completions", body);
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u);
  ASSERT_EQ(lp["token_logprobs"].size(), 8u);
  ASSERT_EQ(lp["top_logprobs"].size(), 8u);
  std::string joined;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(lp["text_offset"][i], joined.size());
    joined += lp["tokens"][i].get<std::string>();
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);  // two ids may share a text
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
  }
  EXPECT_EQ(joined, j["choices"][0]["text"]);
  // Streamed: the chunks' entries concatenate to the same lists.
  json tokens = json::array(), values = json::array(), offsets = json::array();
  for (const json& ev : stream("/v1/completions", body)) {
    const json& c = ev["choices"][0];
    if (!c.contains("logprobs") || c["logprobs"].is_null()) continue;
    for (const json& t : c["logprobs"]["tokens"]) tokens.push_back(t);
    for (const json& v : c["logprobs"]["token_logprobs"]) values.push_back(v);
    for (const json& o : c["logprobs"]["text_offset"]) offsets.push_back(o);
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(values, lp["token_logprobs"]);
  EXPECT_EQ(offsets, lp["text_offset"]);
  // Not asked for: null.
  EXPECT_TRUE(
      post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}})["choices"][0]["logprobs"]
          .is_null());
}

TEST_F(LogprobsFixture, ChatShapeStreamedOrNot) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 8},
                     {"logprobs", true},
                     {"top_logprobs", 3}};
  const json j = post("/v1/chat/completions", body);
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u);
  EXPECT_TRUE(j["choices"][0]["logprobs"]["refusal"].is_null());
  std::string joined;
  for (const json& e : content) {
    std::string bytes;
    for (const json& b : e["bytes"]) bytes += static_cast<char>(b.get<int>());
    joined += bytes;
    EXPECT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_GE(e["top_logprobs"][0]["logprob"].get<double>(), e["logprob"].get<double>());  // greedy
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
  }
  EXPECT_EQ(joined, j["choices"][0]["message"]["content"]);
  json streamed = json::array();
  for (const json& ev : stream("/v1/chat/completions", body)) {
    const json& c = ev["choices"][0];
    if (c.contains("logprobs") && !c["logprobs"].is_null())
      for (const json& e : c["logprobs"]["content"]) streamed.push_back(e);
  }
  EXPECT_EQ(streamed, content);
  json off = body;
  off.erase("logprobs");
  off.erase("top_logprobs");
  EXPECT_TRUE(post("/v1/chat/completions", off)["choices"][0]["logprobs"].is_null());
}

}  // namespace
}  // namespace sluice
