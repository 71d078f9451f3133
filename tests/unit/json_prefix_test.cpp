// grammar/json_prefix (the incremental JSON-object prefix validator) and the
// sampler's token constraint built on it.
#include "grammar/json_prefix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace sluice::grammar {
namespace SLUICE_TEST_FILE {
using runtime::Sampler;
using runtime::SamplerConfig;

// The validator's verdict on `s` fed whole: -1 not a prefix, 0 a prefix, 1 complete.
int verdict(const std::string& s) {
  JsonPrefix j;
  if (!j.push(s)) return -1;
  return j.complete() ? 1 : 0;
}

TEST(JsonPrefix, ExactCases) {
  // Valid prefixes (not complete).
  for (const char* s : {"",
                        "  \n",
                        "{",
                        "{ \"a",
                        "{\"a\"",
                        "{\"a\":",
                        "{\"a\": [1, 2",
                        "{\"a\":-",
                        "{\"a\":-0.",
                        "{\"a\":-0.5e",
                        "{\"a\":-0.5e+",
                        "{\"a\":-0.5e+3",
                        "{\"a\":tr",
                        "{\"a\":\"\\u00",
                        "{\"a\":\"\\",
                        "{\"a\":{\"b\":[{}",
                        "{\"a\":\"\\ud83d",
                        "{\"a\":\"\\ud83d\\u",
                        "{\"a\":\"\xc3",
                        "{\"a\":0"})
    EXPECT_EQ(verdict(s), 0) << s;
  // Complete objects, trailing whitespace allowed.
  for (const char* s :
       {"{}", " {} \n", "{\"a\":1}", "{\"a\":-0.5e+3}", "{\"a\":[true,false,null,{}]}",
        "{\"k\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}", "{\"a\":0,\"b\":1E5}",
        "{\"\xc3\xa9\":\"\xf0\x9f\x98\x80\"}", "{\"a\":{\"b\":{\"c\":[[]]}}}\t"})
    EXPECT_EQ(verdict(s), 1) << s;
  // Dead ends.
  for (const char* s : {"[",
                        "1",
                        "\"a\"",
                        "{,",
                        "{\"a\" 1",
                        "{\"a\":01",
                        "{\"a\":1.}",
                        "{\"a\":.5",
                        "{\"a\":1e}",
                        "{\"a\":-}",
                        "{\"a\":+1",
                        "{\"a\":tru}",
                        "{\"a\":1,}",
                        "{\"a\":[1,]}",
                        "{\"a\":[1}",
                        "{\"a\":1]",
                        "{}x",
                        "{} {}",
                        "{\"a\":\"\\x\"}",
                        "{\"a\":\"\\u12g\"}",
                        "{\"a\":\"\\udc00\"}",
                        "{\"a\":\"\\ud83d\"}",
                        "{\"a\":\"\\ud83dx",
                        "{\"a\":\"\\ud83d\\u0041\"}",
                        "{\"a\":\"\x01\"}",
                        "{\"a\":\"\xc0\xaf\"}",
                        "{\"a\":\"\xed\xa0\x80\"}",
                        "{\"a\":\"\xf5\"}",
                        "{\"a\":\"\xc3(\"}",
                        "{'a':1}",
                        "{\"a\":NaN}",
                        "{\"a\":1 2}"})
    EXPECT_EQ(verdict(s), -1) << s;
}

TEST(JsonPrefix, FailureIsStickyAndByteFeedingEqualsWholeFeeding) {
  JsonPrefix j;
  EXPECT_FALSE(j.push("{]"));
  EXPECT_TRUE(j.failed());
  EXPECT_FALSE(j.push("}"));
  const std::string doc = "{\"x\": [1.25e-3, \"a\\u0041\", {\"y\": null}]}";
  JsonPrefix b;
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_TRUE(b.push_byte(static_cast<uint8_t>(doc[i]))) << i;
    EXPECT_EQ(b.complete(), i + 1 == doc.size()) << i;
  }
}

TEST(JsonPrefix, BlankRunsOutsideStringsCanBeCapped) {
  JsonPrefix unlimited;
  EXPECT_TRUE(unlimited.push(std::string(1000, ' ') + "{"));
  JsonPrefix capped(3);
  EXPECT_TRUE(
      capped.push("   {   \"a  b    c\"   :1   }   "));  // runs of 3, longer ones inside the string
  EXPECT_TRUE(capped.complete());
  JsonPrefix over(3);
  EXPECT_TRUE(over.push("{\"a\":1   "));  // a number ended by whitespace counts it once
  EXPECT_FALSE(over.push(" "));
  JsonPrefix lead(3);
  EXPECT_FALSE(lead.push(" \n\t\r{"));
}

TEST(JsonPrefix, NestingDeeperThanTheLimitIsRefused) {
  std::string s = "{\"a\":";
  for (size_t i = 1; i < JsonPrefix::kMaxDepth; ++i) s += "[";
  EXPECT_EQ(verdict(s), 0);
  EXPECT_EQ(verdict(s + "["), -1);
}

// nlohmann's verdict: one JSON object. A number too large for a double is a
// range error there that stops the parse (the grammar, and the validator,
// has no size limit): no verdict then.
std::optional<bool> oracle(const std::string& s) {
  // A NUL byte is never valid JSON (not whitespace; a control character in a
  // string), but nlohmann's lexer takes it for the end of the input.
  if (s.find('\0') != std::string::npos) return false;
  try {
    return nlohmann::json::parse(s).is_object();
  } catch (const nlohmann::json::out_of_range&) {
    return std::nullopt;  // nlohmann stops at the number: no verdict on the rest
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

TEST(JsonPrefix, AgreesWithNlohmannOnRandomAndMutatedStrings) {
  std::mt19937 rng(1234);
  const std::string alphabet =
      "{}[]:,\"\\ \n0123456789-+.eEtrufalsn ubd\x01\x7f\xc3\xa9\xed\xa0\xf0\x9f\x98\x80";
  const std::vector<std::string> seeds = {
      "{\"a\":[1,-2.5e+3,true,null],\"b\":{\"c\":\"\\u00e9\\ud83d\\ude00x\"}}",
      "{\"k\": \"v\", \"n\": 0.0, \"o\": {}}", "{}"};
  int agree_valid = 0, checked = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    std::string s;
    if (iter % 2 == 0) {  // random text over a JSON-ish alphabet, often opened with '{'
      const int len = static_cast<int>(rng() % 24);
      if (rng() % 2) s = "{";
      for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
      if (rng() % 2) s += "}";
    } else {  // a valid object with a few bytes changed, inserted or removed
      s = seeds[rng() % seeds.size()];
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        const size_t at = rng() % s.size();
        const char c = alphabet[rng() % alphabet.size()];
        switch (rng() % 3) {
          case 0:
            s[at] = c;
            break;
          case 1:
            s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c);
            break;
          default:
            s.erase(at, 1);
        }
      }
    }
    const std::optional<bool> oracle_says = oracle(s);
    if (!oracle_says) continue;
    const bool want = *oracle_says;
    EXPECT_EQ(verdict(s) == 1, want) << "'" << s << "'";
    ++checked;
    if (want) {
      ++agree_valid;
      // Every prefix of a valid document is a valid prefix.
      for (size_t n = 0; n < s.size(); ++n) EXPECT_GE(verdict(s.substr(0, n)), 0) << s.substr(0, n);
    }
  }
  EXPECT_GT(agree_valid, 1000) << "the generator should make plenty of valid objects (of "
                               << checked << ")";
}

// ---- the sampler constraint ------------------------------------------------

// A tiny vocabulary: each token's text, with a JSON-prefix constraint over it.
struct Vocab {
  std::vector<std::string> text = {"{", "}", "\"a\"", ":", "1", "x", "<eos>", " ", "2}"};
  static constexpr int32_t kEos = 6;
  JsonPrefix json;
  std::function<bool(int32_t)> constraint() {
    return [this](int32_t id) {
      if (id == kEos) return json.complete();
      JsonPrefix next = json;
      return next.push(text[static_cast<size_t>(id)]);
    };
  }
  // Samples until the object is complete (or `max` tokens); the tokens chosen.
  std::vector<int32_t> run(Sampler& s, const std::vector<float>& logits, int max = 20) {
    std::vector<int32_t> out;
    s.set_constraint(constraint());
    while (static_cast<int>(out.size()) < max && !json.complete()) {
      const int32_t id = s.sample(logits, out);
      if (id < 0) break;
      out.push_back(id);
      EXPECT_TRUE(json.push(text[static_cast<size_t>(id)]));
    }
    return out;
  }
};

TEST(SamplerConstraint, GreedyTakesTheBestAllowedTokenEachStep) {
  // Preference: x > eos > " " > 2} > 1 > "a" > : > } > {. Unconstrained greedy says "x" forever.
  const std::vector<float> logits = {0.0f, 1.0f, 3.0f, 2.0f, 4.0f, 9.0f, 8.0f, 5.0f, 4.2f};
  SamplerConfig cfg;
  cfg.temperature = 0;
  Sampler plain(cfg);
  EXPECT_EQ(plain.sample(logits, {}), 5);
  Vocab v;
  Sampler s(cfg);
  // " " is allowed before '{' and wins over '{' while it is allowed: leading
  // whitespace forever would be valid, so cap and check the exact tokens.
  EXPECT_EQ(v.run(s, logits, 4), (std::vector<int32_t>{7, 7, 7, 7}));
  // Without the space token's pull: { "a" : 2} — the masked argmax each step.
  std::vector<float> l2 = logits;
  l2[7] = -1.0f;  // " " now below every other token
  Vocab w;
  Sampler s2(cfg);
  EXPECT_EQ(w.run(s2, l2), (std::vector<int32_t>{0, 2, 3, 8}));
  EXPECT_TRUE(w.json.complete());
}

TEST(SamplerConstraint, SampledTokensAreAlwaysAllowedAndUnconstrainedIsUnchanged) {
  SamplerConfig cfg;
  cfg.temperature = 1.0f;
  cfg.top_k = 0;
  cfg.top_p = 1.0f;
  cfg.min_p = 0.0f;
  cfg.seed = 7;
  const std::vector<float> logits = {0.5f, 0.2f, 1.0f, 0.1f, 0.3f, 2.0f, 0.0f, -3.0f};
  // No constraint: the same draws as a sampler that never had one.
  Sampler a(cfg), b(cfg);
  b.set_constraint([](int32_t) { return true; });
  b.set_constraint({});
  EXPECT_FALSE(b.constrained());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(logits, {}), b.sample(logits, {}));
  // Constrained: every run completes an object, each token keeps a valid prefix.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    cfg.seed = seed;
    Sampler s(cfg);
    Vocab v;
    const std::vector<int32_t> out = v.run(s, logits, 200);
    EXPECT_TRUE(v.json.complete()) << "seed " << seed;
    for (int32_t id : out) EXPECT_NE(id, 5);  // "x" can never appear
  }
}

TEST(SamplerConstraint, RejectionFollowsTheMaskedDistribution) {
  // Three tokens with probabilities 0.5, 0.3, 0.2; token 0 refused: the draws
  // must split 0.6 / 0.4 between tokens 1 and 2.
  SamplerConfig cfg;
  cfg.temperature = 1.0f;
  cfg.top_k = 0;
  cfg.top_p = 1.0f;
  cfg.min_p = 0.0f;
  cfg.seed = 99;
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler s(cfg);
  s.set_constraint([](int32_t id) { return id != 0; });
  int n1 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int32_t id = s.sample(logits, {});
    ASSERT_NE(id, 0);
    n1 += id == 1;
  }
  EXPECT_NEAR(static_cast<double>(n1) / n, 0.6, 0.02);  // ~7 sigma
}

TEST(SamplerConstraint, OutsideTheKeptCandidatesAndNothingAllowed) {
  SamplerConfig cfg;
  cfg.temperature = 1.0f;
  cfg.top_k = 2;  // keeps tokens 3 and 2 only
  cfg.seed = 1;
  const std::vector<float> logits = {0.0f, 1.0f, 5.0f, 6.0f};
  Sampler s(cfg);
  s.set_constraint([](int32_t id) { return id < 2; });
  EXPECT_EQ(s.sample(logits, {}), 1);  // the best allowed token of the whole vocabulary
  s.set_constraint([](int32_t) { return false; });
  EXPECT_EQ(s.sample(logits, {}), -1);
}

}  // namespace
}  // namespace sluice::grammar
