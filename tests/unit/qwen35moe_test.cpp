// qwen35moe (hybrid gated DeltaNet + gated attention) beyond the golden
// logits: the engine's invariants hold for the recurrent layers (logits
// bit-identical for any micro-batch size and thread count, because the delta
// rule runs token by token), and the recurrent state is never silently
// wrong: truncate lands on a checkpoint (or the zero state) and says where.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "model_test_support.h"
#include "runtime/session.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::vector<int32_t> case_tokens(const std::string& name) {
  std::ifstream jf(shared_path("golden/" + name + ".json"));
  return nlohmann::json::parse(jf)["tokens"].get<std::vector<int32_t>>();
}

class Qwen35Invariance : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen35Invariance, UbatchAndThreadsGiveIdenticalLogits) {
  REQUIRE_SHARED("golden/" + GetParam() + ".gguf");
  const std::string path = shared_path("golden/" + GetParam() + ".gguf");
  const auto tokens = case_tokens(GetParam());
  auto base_cfg = golden_config();
  base_cfg.ubatch = 512;
  base_cfg.threads = 2;
  const auto baseline = eval_all(*load(path, base_cfg), tokens);
  for (int ubatch : {1, 3, 512})
    for (int threads : {1, 2}) {
      auto cfg = golden_config();
      cfg.ubatch = ubatch;
      cfg.threads = threads;
      EXPECT_TRUE(same_bits(eval_all(*load(path, cfg), tokens), baseline))
          << "ubatch " << ubatch << " threads " << threads;
    }
  // Token by token through eval (the decode path) gives the same bits too.
  auto m = load(path, base_cfg);
  const size_t nv = m->hparams().n_vocab;
  std::vector<float> step(tokens.size() * nv);
  m->reset();
  for (size_t i = 0; i < tokens.size(); ++i)
    m->eval(std::span(tokens).subspan(i, 1), static_cast<int>(i), &step[i * nv]);
  EXPECT_TRUE(same_bits(step, baseline));
}

INSTANTIATE_TEST_SUITE_P(Cases, Qwen35Invariance, ::testing::Values("qwen35moe-f32", "qwen35moe-kquants"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// The DeltaNet layers' state is overwritten by every token: truncate lands
// on the newest checkpoint at or before the target (or the zero state) and
// says where, never silently somewhere else.
TEST(Qwen35State, TruncateLandsOnACheckpointAndSaysWhere) {
  REQUIRE_SHARED("golden/qwen35moe-kquants.gguf");
  const auto tokens = case_tokens("qwen35moe-kquants");
  auto m = load(shared_path("golden/qwen35moe-kquants.gguf"), golden_config());
  const size_t nv = m->hparams().n_vocab;
  const auto baseline = eval_all(*m, tokens);
  EXPECT_GT(m->state_bytes().recurrent, 0u);
  std::vector<float> out(tokens.size() * nv);
  m->reset();
  m->eval(std::span(tokens).first(7), 0, out.data());
  m->checkpoint();
  m->eval(std::span(tokens).subspan(7, 5), 7, &out[7 * nv]);
  EXPECT_EQ(m->truncate(9), 7);  // the checkpoint at 7, not 9
  EXPECT_EQ(m->n_past(), 7);
  m->eval(std::span(tokens).subspan(7), 7, &out[7 * nv]);
  EXPECT_TRUE(same_bits(out, baseline));
  EXPECT_EQ(m->truncate(3), 0);  // before the only checkpoint: the zero state
  m->eval(tokens, 0, out.data());
  EXPECT_TRUE(same_bits(out, baseline));
}

TEST(Qwen35State, AFailedEvalKeepsTheState) {
  REQUIRE_SHARED("golden/qwen35moe-kquants.gguf");
  const auto tokens = case_tokens("qwen35moe-kquants");
  auto m = load(shared_path("golden/qwen35moe-kquants.gguf"), golden_config());
  const size_t nv = m->hparams().n_vocab;
  const auto baseline = eval_all(*m, tokens);
  std::vector<float> out(tokens.size() * nv);
  m->reset();
  m->eval(std::span(tokens).subspan(0, 4), 0, out.data());
  // An out-of-range token fails the eval before any layer runs; the state is
  // then still at 4 positions and the sequence continues exactly.
  const int32_t bad[2] = {tokens[4], 100000};
  EXPECT_NE(error_of([&] { m->eval(bad, 4, out.data()); }).find("out of range"), std::string::npos);
  m->eval(std::span(tokens).subspan(4), 4, &out[4 * nv]);
  EXPECT_TRUE(same_bits(out, baseline));
}

// A session rewind (serve's and chat's prefix reuse) behind the last
// checkpoint re-evaluates from the one before (here the zero state) and
// counts it: the continuation's logits are the one-batch ones, bit for bit.
TEST(Qwen35State, SessionRewindRecomputesFromTheCheckpointAndCountsIt) {
  REQUIRE_SHARED("golden/qwen35moe-kquants.gguf");
  const auto tokens = case_tokens("qwen35moe-kquants");
  const std::string path = shared_path("golden/qwen35moe-kquants.gguf");
  const auto baseline = eval_all(*load(path, golden_config()), tokens);
  runtime::Session s = runtime::Session::open(path, golden_config());
  const size_t nv = static_cast<size_t>(s.n_vocab());
  std::vector<float> out(tokens.size() * nv);
  s.eval_all(std::span(tokens).subspan(0, 12), out.data());
  ASSERT_EQ(s.common_prefix(tokens), 12u);
  s.rewind(6);
  const std::span<const float> last = s.feed(std::span(tokens).subspan(6));
  ASSERT_EQ(s.tokens().size(), tokens.size());
  const std::vector<float> got(last.begin(), last.end());
  const std::vector<float> want(baseline.end() - static_cast<std::ptrdiff_t>(nv), baseline.end());
  EXPECT_TRUE(same_bits(got, want));
  EXPECT_EQ(s.recomputed_tokens(), 6u);  // no checkpoint before 6: positions 0..5 again
  EXPECT_EQ(s.summary().recomputed_tokens, 6u);
}

}  // namespace
}  // namespace sluice::test
