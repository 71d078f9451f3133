// synth's deepseek-v4-flash and glm-5 presets (tools/synth_presets_sparse.cpp):
// the keys and sizes `sluice inspect` reads from zero-data --layers cuts
// (header and tensor table only), against values computed by hand from the
// published configs, and the whole models' sizes from the plan.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "gguf/gguf.h"
#include "io/file.h"
#include "synth_test_support.h"
#include "tools/synth.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using test::has_tensor;
using test::inspect_zero_data;
using test::tensor_bytes;
using test::TempFile;

// The first 4 of V4-Flash's 43 blocks: window-only, window-only, CSA (ratio
// 4 + indexer), HCA (ratio 128); 8 output groups of LoRA 1024; MXFP4 experts
// of 3 x 4096 x 2048 (17 bytes per 32 values); top-6.
TEST(SynthSparsePresets, DeepseekV4FlashCut) {
  TempFile out("v4flash4.gguf");
  const auto j = inspect_zero_data("--preset deepseek-v4-flash --layers 4", out);
  const auto& m = j["metadata"];
  EXPECT_EQ(j["architecture"], "deepseek4");
  EXPECT_EQ(j["block_count"], 4);
  EXPECT_EQ(j["runnable"], true) << j.value("not_runnable", "");
  EXPECT_EQ(m["deepseek4.attention.compress_ratios"], nlohmann::json::array({0, 0, 4, 128}));
  EXPECT_EQ(m["deepseek4.attention.output_group_count"], 8);
  EXPECT_EQ(m["deepseek4.attention.output_lora_rank"], 1024);
  EXPECT_EQ(m["deepseek4.attention.indexer.top_k"], 512);
  EXPECT_EQ(m["deepseek4.attention.sliding_window"], 128);
  EXPECT_EQ(m["deepseek4.expert_used_count"], 6);
  // Blocks 0-2 route by token id: an I32 table of 6 experts per vocabulary entry, no score bias.
  EXPECT_EQ(m["deepseek4.hash_layer_count"], 3);
  EXPECT_EQ(tensor_bytes(j, "blk.2.ffn_gate_tid2eid.weight"), 6ull * 129280 * 4);
  EXPECT_FALSE(has_tensor(j, "blk.2.exp_probs_b.bias"));
  EXPECT_EQ(tensor_bytes(j, "blk.3.exp_probs_b.bias"), 256u * 4);
  const uint64_t expert = 3ull * 4096 * 2048 / 32 * 17;
  EXPECT_EQ(tensor_bytes(j, "blk.2.ffn_gate_exps.weight"), 256 * expert / 3);
  EXPECT_EQ(tensor_bytes(j, "blk.0.attn_output_a.weight"), 64ull * 512 / 8 * 1024 * 8 / 32 * 34);  // Q8_0
  const auto& s = j["sizing"];
  EXPECT_EQ(s["layers"][0]["per_expert_bytes"].get<uint64_t>(), expert);
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 4 * 6 * expert);
  // Per layer (mixers/dsv4_attention.h, state_spec.h): per-position rows
  // of the 512-wide kv plus the compressors' 2 x C inputs (C = 1024 at ratio
  // 4, 512 at 128) and the indexer compressor's kv and scores (256 each) at
  // ratio 4, held as a ring of the window 128 + the --ubatch slack 512 =
  // 640 positions; and per completed block the 512-wide entry (+ the
  // 128-wide indexer key at ratio 4): 4096 / 4 = 1024 and 4096 / 128 = 32 blocks.
  const uint64_t ring = 640;
  const uint64_t rows = ring * (512 + 512 + (512 + 2 * 1024 + 2 * 256) + (512 + 2 * 512));
  const uint64_t blocks = 1024 * (512 + 128) + 32 * 512;
  EXPECT_EQ(s["kv_context"], 4096);
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), (rows + blocks) * 2);
  EXPECT_EQ(s["compressed_bytes"].get<uint64_t>(), (1024 + 32) * 512 * 2);
  EXPECT_EQ(s["indexer_bytes"].get<uint64_t>(), 1024 * 128 * 2);
  SynthConfig cfg = synth_preset("deepseek-v4-flash");
  cfg.n_layer = 4;
  EXPECT_EQ(fs::file_size(out.path), synth_sizes(cfg, 1).file_bytes);
  // The whole model: 43 x 256 experts, 137 GiB of them.
  EXPECT_EQ(synth_sizes(synth_preset("deepseek-v4-flash"), 1).file_bytes > 140ull << 30, true);
}

// GLM-5's first 4 blocks (3 dense, 1 MoE) and its NextN block: MLA latent rows
// of 512 + 64 plus the indexer's 128-wide keys in every block, F16.
TEST(SynthSparsePresets, Glm5Cut) {
  TempFile out("glm5x4.gguf");
  const auto j = inspect_zero_data("--preset glm-5 --layers 4", out);
  const auto& m = j["metadata"];
  EXPECT_EQ(j["architecture"], "glm-dsa");
  EXPECT_EQ(j["block_count"], 5);
  EXPECT_EQ(j["runnable"], true) << j.value("not_runnable", "");
  EXPECT_EQ(m["glm-dsa.nextn_predict_layers"], 1);
  EXPECT_EQ(m["glm-dsa.leading_dense_block_count"], 3);
  EXPECT_EQ(m["glm-dsa.attention.indexer.top_k"], 2048);
  EXPECT_EQ(m["glm-dsa.attention.indexer.head_count"], 32);
  EXPECT_EQ(m["glm-dsa.expert_count"], 256);
  EXPECT_EQ(m["glm-dsa.expert_used_count"], 8);
  EXPECT_EQ(tensor_bytes(j, "blk.0.indexer.attn_q_b.weight"), 2048ull * 32 * 128 * 4);  // F32
  const auto& s = j["sizing"];
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), 4ull * 4096 * (512 + 64 + 128) * 2);
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>() > 0, true);
  SynthConfig cfg = synth_preset("glm-5");
  cfg.n_layer = 4;
  EXPECT_EQ(fs::file_size(out.path), synth_sizes(cfg, 1).file_bytes);
  EXPECT_EQ(synth_sizes(synth_preset("glm-5"), 1).file_bytes > 400ull << 30, true);
}

// The tiny deepseek4's hash-routed blk.0 (as shared/golden's deepseek4 cases):
// row t of ffn_gate_tid2eid lists expert_used_count distinct experts in
// [0, expert_count), different rows differ, and the block has no score bias.
TEST(SynthSparsePresets, HashRoutedBlocksListDistinctExpertsPerToken) {
  const SynthConfig cfg = synth_preset("tiny", "deepseek4");
  TempFile out("d4hash.gguf");
  synth_model(cfg, out.path.string(), 2);
  const auto m = gguf::GgufModel::open(out.path.string());
  EXPECT_EQ(m.metadata().find("deepseek4.hash_layer_count")->u, 1u);
  EXPECT_EQ(m.find("blk.0.exp_probs_b.bias"), nullptr);
  EXPECT_NE(m.find("blk.1.exp_probs_b.bias"), nullptr);
  const gguf::TensorInfo& t = m.require("blk.0.ffn_gate_tid2eid.weight");
  ASSERT_EQ(t.type, GgmlType::I32);
  ASSERT_EQ(t.ne[0], cfg.n_expert_used);
  ASSERT_EQ(t.n_rows(), m.require("token_embd.weight").ne[1]);  // one row per vocabulary entry
  auto file = io::open_file(out.path.string());
  std::vector<int32_t> ids(t.ne[0] * t.n_rows());
  file->read_exact(ids.data(), ids.size() * sizeof(int32_t), t.offset);
  std::set<std::vector<int32_t>> distinct_rows;
  for (uint64_t r = 0; r < t.n_rows(); ++r) {
    const std::vector<int32_t> row(ids.begin() + r * t.ne[0], ids.begin() + (r + 1) * t.ne[0]);
    for (int32_t e : row) ASSERT_TRUE(e >= 0 && e < static_cast<int32_t>(cfg.n_expert)) << "row " << r;
    EXPECT_EQ(std::set<int32_t>(row.begin(), row.end()).size(), row.size()) << "row " << r;
    distinct_rows.insert(row);
  }
  EXPECT_GT(distinct_rows.size(), 20u);  // 8 experts choose 2 in order: 56 possible rows
}

}  // namespace
}  // namespace sluice::tools
