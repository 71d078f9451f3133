// The forward pass against llama.cpp's logits (shared/golden). Applies the
// pass rule of shared/golden/check_golden.py: mean |delta|, fraction of
// positions over the per-position limit, argmax agreement, and the greedy
// continuation up to the first low-margin step. F32 KV cache, as the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "golden_rule.h"
#include "model_test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, LogitsAndGreedyMatchLlamaCpp) {
  const std::string name = GetParam();
  const std::string json_path = shared_path("golden/" + name + ".json");
  if (!exists(json_path)) GTEST_SKIP() << "golden case " << json_path << " not found";
  std::ifstream jf(json_path);
  const nlohmann::json c = nlohmann::json::parse(jf);
  const auto tokens = c["tokens"].get<std::vector<int32_t>>();
  const int n_tokens = c["n_tokens"].get<int>();
  const int n_vocab = c["n_vocab"].get<int>();
  const auto& tol = c["tolerance"];
  const auto ref = read_f32_file(shared_path("golden/" + c["logits_file"].get<std::string>()));
  ASSERT_EQ(ref.size(), static_cast<size_t>(n_tokens) * n_vocab);

  auto m = load(shared_path("golden/" + c["gguf"].get<std::string>()), golden_config());
  ASSERT_EQ(m->hparams().n_vocab, static_cast<uint32_t>(n_vocab));
  const auto got = eval_all(*m, tokens);
  for (float v : got) ASSERT_TRUE(std::isfinite(v));

  const GoldenResult r = compare(ref, got, n_tokens, n_vocab, tol["position_max_abs_diff"].get<double>());
  std::printf("[golden] %-20s mean|d|/std %.3g  worst/std %.3g  over %.3f  argmax %.3f\n", name.c_str(),
              r.mean_abs / r.std, r.worst / r.std, r.frac_over, r.argmax_agree);
  EXPECT_LE(r.mean_abs, tol["mean_abs_diff"].get<double>());
  EXPECT_LE(r.frac_over, tol["max_fraction_positions_exceeding"].get<double>() + 1e-12);
  EXPECT_GE(r.argmax_agree, tol["argmax_agreement_min"].get<double>());

  // Greedy: compared up to the first step whose reference margin is below the gate.
  const auto& g = c["greedy"];
  const auto prompt = g["prompt"].get<std::vector<int32_t>>();
  const auto want = g["tokens"].get<std::vector<int32_t>>();
  const auto margins = g["top1_top2_margins"].get<std::vector<double>>();
  const double gate = tol["greedy_margin_threshold"].get<double>();
  size_t n_cmp = 0;
  while (n_cmp < margins.size() && margins[n_cmp] >= gate) ++n_cmp;
  n_cmp = std::min(n_cmp, want.size());
  const auto got_greedy = greedy(*m, prompt, static_cast<int>(want.size()));
  size_t same = 0;
  while (same < want.size() && got_greedy[same] == want[same]) ++same;
  std::printf("[golden] %-20s greedy: %zu of %zu steps identical (gate requires %zu)\n", name.c_str(), same,
              want.size(), n_cmp);
  for (size_t i = 0; i < n_cmp; ++i) EXPECT_EQ(got_greedy[i], want[i]) << "greedy step " << i;
}

INSTANTIATE_TEST_SUITE_P(Cases, GoldenTest,
                         ::testing::Values("qwen3moe-f32", "qwen3moe-q8_0-q4_0", "qwen3moe-kquants", "qwen3moe-mixed",
                                           "llama-moe-f32", "llama-moe-q8_0", "llama-dense-f16", "gpt-oss-mxfp4",
                                           "glm4moe-f32", "glm4moe-q8_0", "deepseek2-f32", "deepseek2-q4_k",
                                           "deepseek2-mtp-f32", "qwen35moe-f32", "qwen35moe-kquants",
                                           "qwen35moe-mtp-f32", "gemma4-f32", "gemma4-kquants", "gemma4-split-q8_0",
                                           "glm-dsa-f32", "glm-dsa-kquants", "deepseek4-f32", "deepseek4-mxfp4"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// The comparison must be able to fail: a model evaluated with a perturbed
// sequence (one token changed) is far outside the tolerance.
TEST(GoldenSelfCheck, DetectsWrongLogits) {
  const std::string json_path = shared_path("golden/qwen3moe-f32.json");
  if (!exists(json_path)) GTEST_SKIP() << "golden case " << json_path << " not found";
  std::ifstream jf(json_path);
  const nlohmann::json c = nlohmann::json::parse(jf);
  auto tokens = c["tokens"].get<std::vector<int32_t>>();
  tokens[1] = tokens[1] == 3 ? 4 : 3;
  const auto ref = read_f32_file(shared_path("golden/qwen3moe-f32.logits.f32"));
  auto m = load(shared_path("golden/qwen3moe-f32.gguf"), golden_config());
  const auto got = eval_all(*m, tokens);
  const GoldenResult r = compare(ref, got, 24, 512, c["tolerance"]["position_max_abs_diff"].get<double>());
  EXPECT_GT(r.mean_abs, c["tolerance"]["mean_abs_diff"].get<double>());
}

}  // namespace
}  // namespace sluice::test
