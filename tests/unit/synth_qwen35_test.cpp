// Tests for synth's qwen35moe generator (declared in src/model/arch/arch_qwen35moe.cpp)
// and the real-shape presets: the layouts against the llama.cpp-made golden
// files, a tiny file that the engine runs, and the sizing `sluice inspect`
// reports for the Qwen3.6-35B-A3B / Qwen3.5-397B-A17B tables (zero-data files:
// header and tensor table only), against values computed by hand from the
// shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "gguf/gguf.h"
#include "synth_test_support.h"
#include "tools/synth.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using test::shared_path;
using test::sluice_cli;
using test::TempFile;
using test::tensors_of;

// The shapes of shared/golden/qwen35moe-*.gguf (README: n_embd 256, 8 experts
// top-2 of FFN 128 + shared 256, 4 q / 2 kv heads x 64, IMROPE 16 dims
// [3, 3, 2, 0], DeltaNet 2 k / 4 v heads x 32, conv 4), with the golden's vocabulary.
SynthConfig qwen35_golden_shape(const char* golden, uint32_t layers, uint32_t interval,
                                uint32_t nextn) {
  SynthConfig c = synth_preset("tiny", "qwen35moe");
  c.n_layer = layers, c.full_attention_interval = interval, c.n_nextn = nextn;
  c.n_embd = 256, c.n_expert = 8, c.n_expert_used = 2, c.n_ff_exp = 128, c.n_ff_shexp = 256;
  c.n_head = 4, c.n_head_kv = 2, c.head_dim = 64, c.n_rot = 16;
  c.ssm_state_size = 32, c.ssm_group_count = 2, c.ssm_time_step_rank = 4, c.ssm_conv_kernel = 4;
  c.vocab_path = shared_path(golden);
  c.n_vocab = 0;
  c.expert_type = c.down_type = c.attn_type = c.attn_v_type = c.embd_type = c.output_type =
      GgmlType::F32;
  return c;
}

std::vector<std::string> names_in_order(const gguf::GgufModel& m) {
  std::vector<std::string> v;
  for (const auto& t : m.tensors()) v.push_back(t.name);
  return v;
}

// Every F32 golden (trunk only, and with the NextN block): exactly its tensors
// (name, type, shape), its architecture keys with their values and types.
TEST(SynthQwen35, MatchesGoldenLayoutsAndMetadata) {
  struct Case {
    const char* golden;
    uint32_t layers, interval, nextn;
  };
  for (const Case& c : {Case{"golden/qwen35moe-f32.gguf", 8, 4, 0},
                        Case{"golden/qwen35moe-mtp-f32.gguf", 4, 4, 1}}) {
    if (!test::shared_has(c.golden)) GTEST_SKIP() << "shared golden " << c.golden << " absent";
    const auto golden = gguf::GgufModel::open(shared_path(c.golden));
    TempFile out("q35.gguf");
    synth_model(qwen35_golden_shape(c.golden, c.layers, c.interval, c.nextn), out.path.string(), 2);
    const auto m = gguf::GgufModel::open(out.path.string());
    EXPECT_EQ(tensors_of(m), tensors_of(golden)) << c.golden;
    for (const auto& [k, v] : golden.metadata().entries()) {
      if (k.rfind("qwen35moe.", 0) != 0) continue;
      const gguf::Value* mine = m.metadata().find(k);
      ASSERT_NE(mine, nullptr) << k;
      EXPECT_EQ(mine->type, v.type) << k;
      EXPECT_EQ(mine->u, v.u) << k;
      EXPECT_FLOAT_EQ(static_cast<float>(mine->f), static_cast<float>(v.f)) << k;
    }
    for (const auto& [k, v] : m.metadata().entries()) {
      if (k.rfind("qwen35moe.", 0) == 0) {
        EXPECT_NE(golden.metadata().find(k), nullptr) << "extra key " << k;
      }
    }
    const auto sections = m.metadata().get_int_array("qwen35moe.rope.dimension_sections");
    ASSERT_TRUE(sections.has_value());
    EXPECT_EQ(*sections, (std::vector<int64_t>{3, 3, 2, 0}));
  }
}

// qwen35moe-kquants went through llama-quantize (full_attention_interval 2):
// the same tensors in the same order (tensors outside blk.N, then by block and name).
TEST(SynthQwen35, QuantizedGoldenGivesTensorOrder) {
  const char* rel = "golden/qwen35moe-kquants.gguf";
  if (!test::shared_has(rel)) GTEST_SKIP() << "shared golden " << rel << " absent";
  const auto golden = gguf::GgufModel::open(shared_path(rel));
  TempFile out("q35k.gguf");
  synth_model(qwen35_golden_shape(rel, 4, 2, 0), out.path.string(), 2);
  EXPECT_EQ(names_in_order(gguf::GgufModel::open(out.path.string())), names_in_order(golden));
}

// The tiny preset runs: logits are finite over a 256-token prompt (the
// DeltaNet decay ssm_a is negative, so states stay bounded), with and without
// the MTP block.
TEST(SynthQwen35, TinyFileRuns) {
  constexpr uint64_t kTokens = 256;
  std::string ids;
  for (uint64_t i = 0; i < kTokens; ++i) ids += (i ? "," : "") + std::to_string(3 + (i * 37) % 250);
  for (const char* extra : {"", " --mtp"}) {
    TempFile out("q35tiny.gguf"), logits("q35tiny.f32");
    auto [rc, log] =
        sluice_cli("synth -q --arch qwen35moe" + std::string(extra) + " -o " + out.path.string());
    ASSERT_EQ(rc, 0) << log;
    std::tie(rc, log) = sluice_cli("logits -m " + out.path.string() + " --tokens " + ids + " -o " +
                                   logits.path.string());
    ASSERT_EQ(rc, 0) << log;
    const auto m = gguf::GgufModel::open(out.path.string());
    const uint64_t n_vocab = m.require("token_embd.weight").ne[1];
    ASSERT_EQ(fs::file_size(logits.path), kTokens * n_vocab * sizeof(float));
    std::vector<float> v(kTokens * n_vocab);
    FILE* f = std::fopen(logits.path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fread(v.data(), sizeof(float), v.size(), f), v.size());
    std::fclose(f);
    float lo = v[0], hi = v[0];
    for (float x : v) {
      ASSERT_TRUE(std::isfinite(x));
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
    EXPECT_GT(hi - lo, 0.1f) << "logits should not be constant";
  }
}

nlohmann::json inspect_zero_data(const std::string& args, const TempFile& out,
                                 const std::string& inspect_args = "") {
  auto [rc, log] = sluice_cli("synth -q --zero-data -o " + out.path.string() + " " + args);
  EXPECT_EQ(rc, 0) << log;
  std::tie(rc, log) = sluice_cli("inspect --json " + inspect_args + " " + out.path.string());
  EXPECT_EQ(rc, 0) << log.substr(0, 2000);
  return nlohmann::json::parse(log);
}

uint64_t bytes_under(const nlohmann::json& j, const std::string& prefix) {
  uint64_t n = 0;
  for (const auto& t : j["tensors"])
    if (t["name"].get<std::string>().rfind(prefix, 0) == 0) n += t["bytes"].get<uint64_t>();
  return n;
}

// Qwen3.6-35B-A3B at 262144 positions: F16 KV rows only in the 10 attention
// layers (3, 7, ..., 39): 10 x 262144 x 2 kv heads x (256 + 256) x 2 B = 5 GiB;
// the 30 DeltaNet layers keep 3 conv taps of 2*16*128 + 32*128 = 8192 channels
// and 32 value heads of a 128 x 128 matrix, F32: 30 x (3*8192 + 32*128*128) x 4 B
// = 65863680 B (62.8 MiB). With that state, the dense weights (Q4_K_M) and the
// scratch, everything but the routed experts fits 24 GiB (min_ram adds the one
// widest layer's routed experts, which streaming needs at least).
TEST(SynthQwen35, Qwen36PresetStateFits24GiBAt262k) {
  TempFile out("q36.gguf");
  const auto j = inspect_zero_data("--preset qwen3.6-35b-a3b", out, "-c 262144");
  EXPECT_EQ(j["architecture"], "qwen35moe");
  EXPECT_EQ(j["block_count"], 40);
  EXPECT_EQ(j["metadata"]["qwen35moe.expert_count"], 256);
  EXPECT_EQ(j["metadata"]["qwen35moe.ssm.inner_size"], 4096);
  EXPECT_EQ(j["metadata"].count("qwen35moe.nextn_predict_layers"), 0u);
  EXPECT_EQ(j["hyperparameters"]["vocab_size"], 248320);
  EXPECT_EQ(j["runnable"], true) << j.value("not_runnable", "");
  const auto& s = j["sizing"];
  EXPECT_EQ(s["kv_context"], 262144);
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), 10ull * 262144 * 2 * (256 + 256) * 2);
  EXPECT_EQ(s["recurrent_bytes"].get<uint64_t>(), 30ull * (3 * 8192 + 32 * 128 * 128) * 4);
  const uint64_t resident = j["dense_bytes"].get<uint64_t>() + s["kv_bytes"].get<uint64_t>() +
                            s["recurrent_bytes"].get<uint64_t>() +
                            s["scratch_bytes"].get<uint64_t>();
  EXPECT_LT(resident, 24ull << 30);
  EXPECT_LT(s["min_ram_bytes"].get<uint64_t>(), 24ull << 30);
  // Experts: 256 per layer of gate/up Q4_K (2048/256*144 B x 512 rows = 589824 B
  // each) and down Q4_K (512/256*144 x 2048 = 589824) or Q6_K (2*210*2048 =
  // 860160) in the use_more_bits(i, 40) blocks (0-4, 35-39, 7, 10, ..., 34: 20).
  constexpr uint64_t kExpert = 3 * 589824ull, kExpertQ6 = 2 * 589824ull + 860160ull;
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 256 * (20 * kExpertQ6 + 20 * kExpert));
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 8 * (20 * kExpertQ6 + 20 * kExpert));
  // Q4_K_M's other rules: attn_qkv Q5_K; attn_v Q6_K for the i-th attn_v with
  // use_more_bits(i, 40) (i < 5 or i == 7: blocks 3..19 and 31), else Q4_K.
  std::string v_types;
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    if (name.ends_with(".attn_qkv.weight")) {
      EXPECT_EQ(t["type"], "Q5_K") << name;
    }
    if (name.ends_with(".attn_v.weight")) v_types += t["type"].get<std::string>() + " ";
  }
  EXPECT_EQ(v_types, "Q6_K Q6_K Q6_K Q6_K Q6_K Q4_K Q4_K Q6_K Q4_K Q4_K ");
}

// --mtp appends the NextN block 40 (full attention + MoE + nextn.*): not part
// of the trunk, so the trunk's KV and state are unchanged and its bytes are
// reported as not loaded.
TEST(SynthQwen35, Qwen36PresetWithMtpBlock) {
  TempFile out("q36mtp.gguf");
  const auto j = inspect_zero_data("--preset qwen3.6-35b-a3b --mtp", out, "-c 4096");
  EXPECT_EQ(j["block_count"], 41);
  EXPECT_EQ(j["metadata"]["qwen35moe.nextn_predict_layers"], 1);
  const auto& s = j["sizing"];
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>(), bytes_under(j, "blk.40."));
  EXPECT_GT(bytes_under(j, "blk.40.nextn."), 0u);
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), 10ull * 4096 * 2 * (256 + 256) * 2);
  EXPECT_EQ(s["recurrent_bytes"].get<uint64_t>(), 30ull * (3 * 8192 + 32 * 128 * 128) * 4);
}

// Qwen3.5-397B-A17B cut to 8 layers (2 attention): 512 experts top-10 of FFN
// 1024 on a 4096-wide stream; the file's size is the plan's, its data a hole.
TEST(SynthQwen35, Qwen35PresetLayerCut) {
  TempFile out("q397.gguf");
  const auto j = inspect_zero_data("--preset qwen3.5-397b-a17b --layers 8 --mtp", out, "-c 262144");
  EXPECT_EQ(j["block_count"], 9);
  EXPECT_EQ(j["metadata"]["qwen35moe.expert_count"], 512);
  EXPECT_EQ(j["metadata"]["qwen35moe.expert_used_count"], 10);
  EXPECT_EQ(j["metadata"]["qwen35moe.ssm.time_step_rank"], 64);
  EXPECT_EQ(j["sizing"]["kv_bytes"].get<uint64_t>(), 2ull * 262144 * 2 * (256 + 256) * 2);
  // 6 DeltaNet layers: 3 taps of 2*16*128 + 64*128 = 12288 channels, 64 heads of 128 x 128.
  EXPECT_EQ(j["sizing"]["recurrent_bytes"].get<uint64_t>(),
            6ull * (3 * 12288 + 64 * 128 * 128) * 4);
  SynthConfig cfg = synth_preset("qwen3.5-397b-a17b");
  cfg.n_layer = 8, cfg.n_nextn = 1;
  EXPECT_EQ(fs::file_size(out.path), synth_sizes(cfg, 1).file_bytes);
  // The whole model's table: ~220 GB at Q4_K_M, far beyond this disk.
  EXPECT_GT(synth_sizes(synth_preset("qwen3.5-397b-a17b"), 1).file_bytes, 200ull << 30);
}

TEST(SynthQwen35, LayerCutIsBoundedByThePreset) {
  TempFile out("q36x.gguf");
  auto [rc, log] = sluice_cli("synth -q --zero-data --preset qwen3.6-35b-a3b --layers 41 -o " +
                              out.path.string());
  EXPECT_NE(rc, 0);
  EXPECT_NE(log.find("--layers"), std::string::npos) << log;
  std::tie(rc, log) = sluice_cli("synth -q --arch qwen3moe --nextn 1 -o " + out.path.string());
  EXPECT_NE(rc, 0);
  EXPECT_NE(log.find("--nextn"), std::string::npos) << log;
}

}  // namespace
}  // namespace sluice::tools
