// Streamed /v1/completions with logprobs: one event per sampled token, even
// when the token adds no text yet (Engine::wait's every_token), so a client
// can time each token (bench/serve_load.sh does). A stop string makes the
// stories model's " there" wait for the next token (it could begin the stop
// string " there is"); its event then carries its log-probability and "".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using json = nlohmann::json;

std::vector<json> events(const LiveServer& ls, const json& body) {
  auto r = ls.client().Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200);
  std::vector<json> out;
  if (!r) return out;
  for (size_t pos = 0;;) {
    const size_t end = r->body.find("\n\n", pos);
    if (end == std::string::npos) break;
    const std::string payload = r->body.substr(pos + 6, end - pos - 6);  // after "data: "
    if (payload != "[DONE]") out.push_back(json::parse(payload));
    pos = end + 2;
  }
  return out;
}

TEST(ServeTokenEvents, EveryTokenIsAnEventWhenLogprobsAreAsked) {
  LiveServer ls(plain_config());
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"stream", true},
                     {"logprobs", 0}, {"stop", {" there is"}}};
  // The whole answer: its text and its tokens' pieces.
  json whole = body;
  whole["stream"] = false;
  auto w = ls.client().Post("/v1/completions", whole.dump(), "application/json");
  ASSERT_TRUE(w && w->status == 200);
  const json lp = json::parse(w->body)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u);
  ASSERT_EQ(lp["tokens"][1], " there");  // the held-back token this test is about

  std::string text;
  json tokens = json::array();
  int held_back = 0;  // events with a token but no text
  for (const json& ev : events(ls, body)) {
    const json& c = ev["choices"][0];
    text += c["text"].get<std::string>();
    if (c["logprobs"].is_null()) continue;
    ASSERT_EQ(c["logprobs"]["tokens"].size(), 1u) << ev;  // one token per event
    tokens.push_back(c["logprobs"]["tokens"][0]);
    held_back += c["text"] == "";
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(text, json::parse(w->body)["choices"][0]["text"]);
  EXPECT_GE(held_back, 1);
}

}  // namespace
}  // namespace sluice::test
