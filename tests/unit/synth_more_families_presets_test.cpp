// synth's gemma-4-26b-a4b, lfm2-8b-a1b, qwen2-57b-a14b and ling-3.0-tiny presets
// (tools/synth_presets_more_families.cpp): each whole model's parameter
// count against the published total, the Gemma file's size against the
// ggml-org Q4_K_M GGUF, the layer kinds `inspect` names, and llama-quantize's
// Q4_K_M types (use_more_bits blocks, row fallbacks, tied embeddings) read
// from zero-data files (header and tensor table only).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "synth_test_support.h"
#include "tools/synth.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

using test::has_tensor;
using test::inspect_zero_data;
using test::inspected_tensor;
using test::TempFile;

double params_billions(const nlohmann::json& j) {
  double n = 0;
  for (const auto& t : j["tensors"]) {
    double e = 1;
    for (const auto& d : t["shape"]) e *= d.get<double>();
    n += e;
  }
  return n / 1e9;
}

std::string type_of(const nlohmann::json& j, const std::string& name) {
  const nlohmann::json t = inspected_tensor(j, name);
  return t.is_null() ? "(absent)" : t["type"].get<std::string>();
}

// Gemma-4-26B-A4B: 25.2B parameters (the model card's total, text weights),
// ggml-org/gemma-4-26B-A4B-it-GGUF's Q4_K_M is 16.80 GB on disk. Blocks 5,
// 11, ... are full attention (2 KV heads of 512, no attn_v: K = V); the rest
// slide over 1024 positions. Expert down rows are 704 wide, not a multiple of
// 256: Q4_K falls back to Q5_0 and the more-bits blocks' Q6_K to Q8_0.
TEST(SynthMorePresets, Gemma4_26bA4bHasThePublishedSizeAndMix) {
  TempFile out("g26.gguf");
  const auto j = inspect_zero_data("--preset gemma-4-26b-a4b", out);
  EXPECT_EQ(j["architecture"], "gemma4");
  EXPECT_EQ(j["block_count"], 30);
  EXPECT_NEAR(params_billions(j), 25.2, 0.1);
  EXPECT_NEAR(static_cast<double>(std::filesystem::file_size(out.path)) / 1e9, 16.80, 0.05);
  EXPECT_EQ(j["tensors"].size(), 658u);
  EXPECT_FALSE(has_tensor(j, "output.weight"));
  EXPECT_EQ(type_of(j, "token_embd.weight"), "Q6_K");  // tied: the output's type
  EXPECT_EQ(type_of(j, "blk.0.ffn_down_exps.weight"), "Q8_0");
  EXPECT_EQ(type_of(j, "blk.4.ffn_down_exps.weight"), "Q5_0");
  EXPECT_EQ(type_of(j, "blk.4.ffn_gate_up_exps.weight"), "Q4_K");
  EXPECT_FALSE(has_tensor(j, "blk.5.attn_v.weight"));
  // attn_v by its index among the 25 attn_v tensors (n/8 = 3, 7n/8 = 21):
  // index 0 and 5 (blocks 0 and 6: (5 - 3) % 3 == 2) more bits, index 3
  // (block 3) not, index 21 (block 25) as one of the last eighth (counted
  // over the 30 blocks, 21 < 26 and (21 - 3) % 3 == 0 would make it Q4_K).
  EXPECT_EQ(type_of(j, "blk.0.attn_v.weight"), "Q6_K");
  EXPECT_EQ(type_of(j, "blk.25.attn_v.weight"), "Q6_K");
  EXPECT_EQ(type_of(j, "blk.3.attn_v.weight"), "Q4_K");
  EXPECT_EQ(type_of(j, "blk.6.attn_v.weight"), "Q6_K");
  const auto& m = j["metadata"];
  EXPECT_EQ(m["gemma4.attention.sliding_window"], 1024);
  EXPECT_EQ(m["gemma4.expert_count"], 128);
  EXPECT_EQ(m["gemma4.expert_used_count"], 8);
}

// LFM2-8B-A1B: 8.3B parameters (the model card); attention in blocks 2, 6,
// 10, 14, 18 and 21, short convolutions elsewhere; blocks 0-1 dense.
TEST(SynthMorePresets, Lfm2_8bA1bHasThePublishedShape) {
  TempFile out("lfm8.gguf");
  const auto j = inspect_zero_data("--preset lfm2-8b-a1b", out);
  EXPECT_EQ(j["architecture"], "lfm2moe");
  EXPECT_NEAR(params_billions(j), 8.3, 0.1);
  const auto& m = j["metadata"];
  const std::set<int> attention = {2, 6, 10, 14, 18, 21};
  for (int l = 0; l < 24; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(has_tensor(j, b + "attn_q.weight"), attention.count(l) == 1) << b;
    EXPECT_EQ(has_tensor(j, b + "shortconv.conv.weight"), attention.count(l) == 0) << b;
  }
  const auto [rc, text] = test::sluice_cli("inspect " + out.path.string());
  EXPECT_EQ(rc, 0);
  EXPECT_NE(text.find("short-conv x18, attention x6 (blk 2, 6, 10, 14, 18, 21)"), std::string::npos) << text;
  EXPECT_EQ(m["lfm2moe.leading_dense_block_count"], 2);
  EXPECT_TRUE(has_tensor(j, "blk.1.ffn_down.weight"));
  EXPECT_TRUE(has_tensor(j, "blk.2.ffn_down_exps.weight"));
  EXPECT_TRUE(has_tensor(j, "blk.21.attn_v.weight"));
  EXPECT_TRUE(has_tensor(j, "blk.20.shortconv.in_proj.weight"));
  EXPECT_EQ(type_of(j, "token_embd.weight"), "Q6_K");  // tied
  // ffn_down* by block (24 blocks: 0-2 and 21-23 more bits, then every third).
  EXPECT_EQ(type_of(j, "blk.0.ffn_down.weight"), "Q6_K");
  EXPECT_EQ(type_of(j, "blk.3.ffn_down_exps.weight"), "Q4_K");
  EXPECT_EQ(type_of(j, "blk.5.ffn_down_exps.weight"), "Q6_K");
  // attn_v by its index among the 6 (n/8 = 0: index 0 is not below it;
  // (i - 0) % 3 == 2 and i >= 5 are): blocks 2, 6 Q4_K; 10 (index 2) and 21 (index 5) Q6_K.
  EXPECT_EQ(type_of(j, "blk.2.attn_v.weight"), "Q4_K");
  EXPECT_EQ(type_of(j, "blk.10.attn_v.weight"), "Q6_K");
  EXPECT_EQ(type_of(j, "blk.21.attn_v.weight"), "Q6_K");
  // A --layers cut keeps the attention blocks below it.
  TempFile cut("lfm8x4.gguf");
  const auto c = inspect_zero_data("--preset lfm2-8b-a1b --layers 4", cut);
  EXPECT_EQ(c["block_count"], 4);
  EXPECT_TRUE(has_tensor(c, "blk.2.attn_q.weight"));
  EXPECT_TRUE(has_tensor(c, "blk.3.shortconv.conv.weight"));
}

// Qwen2-57B-A14B: 57.4B parameters (the model card); 64 experts top-8 of 2560
// plus a shared expert of 20480; an untied Q6_K output; Q4_K embeddings.
TEST(SynthMorePresets, Qwen2_57bA14bHasThePublishedShape) {
  TempFile out("q57.gguf");
  const auto j = inspect_zero_data("--preset qwen2-57b-a14b", out);
  EXPECT_EQ(j["architecture"], "qwen2moe");
  EXPECT_EQ(j["block_count"], 28);
  EXPECT_NEAR(params_billions(j), 57.4, 0.1);
  EXPECT_EQ(type_of(j, "output.weight"), "Q6_K");
  EXPECT_EQ(type_of(j, "token_embd.weight"), "Q4_K");
  // 28 blocks: n/8 = 3, 7n/8 = 24.
  for (const char* t : {"attn_v", "ffn_down_exps", "ffn_down_shexp"}) {
    EXPECT_EQ(type_of(j, "blk.2." + std::string(t) + ".weight"), "Q6_K") << t;
    EXPECT_EQ(type_of(j, "blk.3." + std::string(t) + ".weight"), "Q4_K") << t;
    EXPECT_EQ(type_of(j, "blk.5." + std::string(t) + ".weight"), "Q6_K") << t;
    EXPECT_EQ(type_of(j, "blk.24." + std::string(t) + ".weight"), "Q6_K") << t;
  }
  const auto& m = j["metadata"];
  EXPECT_EQ(m["qwen2moe.expert_shared_feed_forward_length"], 20480);
  EXPECT_EQ(m["qwen2moe.expert_feed_forward_length"], 2560);
}

// Ling-3.0-tiny: 7.9B parameters (llama.cpp's LLM_TYPE_7_9B_A1_3B for 24
// blocks of 1536 with 128 experts); MLA every 4th block, KDA elsewhere;
// expert groups 8 / 4; Q4_K_M's more-bits attn_v counted over the 18 KDA
// blocks' attn_v (n/8 = 2, 7n/8 = 15).
TEST(SynthMorePresets, Ling30TinyHasThePublishedShape) {
  TempFile out("ling.gguf");
  const auto j = inspect_zero_data("--preset ling-3.0-tiny", out);
  EXPECT_EQ(j["architecture"], "bailingmoe3");
  EXPECT_EQ(j["block_count"], 24);
  EXPECT_NEAR(params_billions(j), 7.89, 0.01);
  EXPECT_TRUE(has_tensor(j, "blk.3.attn_gate.weight"));
  EXPECT_TRUE(has_tensor(j, "blk.23.attn_kv_a_mqa.weight"));
  EXPECT_TRUE(has_tensor(j, "blk.22.ssm_f_a.weight"));
  EXPECT_FALSE(has_tensor(j, "blk.22.attn_gate.weight"));
  // KDA attn_v index i sits in block i + i / 3.
  EXPECT_EQ(type_of(j, "blk.1.attn_v.weight"), "Q6_K");   // index 1 < 2
  EXPECT_EQ(type_of(j, "blk.2.attn_v.weight"), "Q4_K");   // index 2
  EXPECT_EQ(type_of(j, "blk.5.attn_v.weight"), "Q6_K");   // index 4: (4 - 2) % 3 == 2
  EXPECT_EQ(type_of(j, "blk.20.attn_v.weight"), "Q6_K");  // index 15 >= 15
  EXPECT_EQ(type_of(j, "blk.3.attn_k_b.weight"), "Q5_0");  // rows of 128: the Q4_K fallback
  EXPECT_EQ(type_of(j, "output.weight"), "Q6_K");
  const auto& m = j["metadata"];
  EXPECT_EQ(m["bailingmoe3.expert_group_count"], 8);
  EXPECT_EQ(m["bailingmoe3.expert_group_used_count"], 4);
  EXPECT_EQ(m["bailingmoe3.expert_weights_norm"], true);
}

}  // namespace
}  // namespace sluice::tools
