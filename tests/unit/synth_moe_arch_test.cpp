// Tests for synth's DeepSeek-V3-style architectures (glm4moe, deepseek2): the
// layouts against the llama.cpp-made golden files (tensor names, types and
// shapes, every architecture key and value, llama-quantize's tensor order),
// forward passes of tiny files (with NextN blocks, with and without q LoRA),
// and the sizing `sluice inspect` reports for the full-size presets' tensor
// tables (zero-data files), against values computed by hand from the shapes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "synth_test_support.h"
#include "tools/synth.h"
#include "util/error.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using test::shared_path;

using test::sluice_cli;
using test::tensors_of;
using test::TempFile;
using test::TensorSet;

std::set<std::string> keys_of(const gguf::GgufModel& m, const std::string& prefix = "") {
  std::set<std::string> s;
  for (const auto& [k, v] : m.metadata().entries())
    if (k.rfind(prefix, 0) == 0) s.insert(k);
  return s;
}

// Same keys overall (the golden's general.description and our
// general.quantization_version aside: the F32 goldens have no quantization),
// and every key under `prefix` with the golden's type and value.
void expect_same_metadata(const gguf::GgufModel& got, const gguf::GgufModel& want, const std::string& prefix) {
  std::set<std::string> ours = keys_of(got), theirs = keys_of(want);
  ours.erase("general.quantization_version");
  theirs.erase("general.description");
  EXPECT_EQ(ours, theirs);
  for (const auto& [k, v] : want.metadata().entries()) {
    if (k.rfind(prefix, 0) != 0) continue;
    const gguf::Value* mine = got.metadata().find(k);
    ASSERT_NE(mine, nullptr) << k;
    EXPECT_EQ(mine->type, v.type) << k;
    EXPECT_EQ(mine->u, v.u) << k;
    EXPECT_EQ(mine->s, v.s) << k;
    EXPECT_FLOAT_EQ(static_cast<float>(mine->f), static_cast<float>(v.f)) << k;
  }
}

void all_types(SynthConfig& c, GgmlType t) {
  c.expert_type = c.down_type = c.attn_type = c.attn_v_type = c.embd_type = c.output_type = t;
}

// The shapes of shared/golden/glm4moe-*.gguf (README: n_embd 256, 2 blocks + 1
// NextN, 1 dense of FFN 192, 16 experts / 4 + 1 shared of 32, 4 q / 2 kv heads
// x 64, rope 32 dims), with the golden's own tokenizer.
SynthConfig glm4moe_golden_shape(GgmlType t) {
  SynthConfig c = synth_preset("tiny", "glm4moe");
  c.n_layer = 2, c.n_nextn = 1, c.n_lead_dense = 1, c.n_ff = 192;
  c.n_embd = 256, c.n_expert = 16, c.n_expert_used = 4, c.n_expert_shared = 1, c.n_ff_exp = 32;
  c.n_head = 4, c.n_head_kv = 2, c.head_dim = 64, c.n_rot = 32;
  c.rope_theta = 1e6f, c.rms_eps = 1e-5f, c.context_length = 131072, c.expert_weights_scale = 2.5f;
  c.vocab_path = shared_path("golden/glm4moe-f32.gguf");
  c.n_vocab = 0;
  all_types(c, t);
  return c;
}

// deepseek2-f32 (README: 3 blocks, 1 dense of FFN 256, MLA 4 heads, q_lora 128,
// kv_lora 128, qk_nope 32 + qk_rope 32, v_head 64, 16 experts / 4 in 8 groups
// of which 4 used + 1 shared of 32, YaRN 40 over 4096) or, with mtp,
// deepseek2-mtp-f32 (q_lora 64, kv_lora 64, 32 + 16, v_head 32, 4 groups / 2,
// expert FFN 16, + 1 NextN block).
SynthConfig deepseek2_golden_shape(bool mtp, GgmlType t) {
  SynthConfig c = synth_preset("tiny", "deepseek2");
  c.n_layer = 3, c.n_nextn = mtp ? 1 : 0, c.n_lead_dense = 1, c.n_ff = 256;
  c.n_embd = 256, c.n_head = 4, c.n_expert = 16, c.n_expert_used = 4, c.n_expert_shared = 1;
  c.q_lora_rank = c.kv_lora_rank = mtp ? 64 : 128;
  c.n_rot = mtp ? 16 : 32;
  c.head_dim = 32 + c.n_rot;
  c.head_dim_v = mtp ? 32 : 64;
  c.n_group = mtp ? 4 : 8, c.n_group_used = mtp ? 2 : 4;
  c.n_ff_exp = mtp ? 16 : 32;
  c.rope_theta = 1e4f, c.rms_eps = 1e-6f, c.context_length = 163840;
  c.rope_scaling_factor = 40.0f, c.rope_orig_ctx = 4096, c.yarn_log_multiplier = 0.1f;
  c.vocab_path = shared_path(mtp ? "golden/deepseek2-mtp-f32.gguf" : "golden/deepseek2-f32.gguf");
  c.n_vocab = 0;
  all_types(c, t);
  return c;
}

// ---- layouts against llama.cpp's files ------------------------------------------

// Each F32 golden: a synth file of its shape has exactly its tensors (name,
// type, shape; the NextN blocks' nextn.* tensors included), its metadata key
// set and every architecture key's value.
TEST(SynthMoeArch, MatchesGoldenLayoutsAndMetadata) {
  struct Case { const char* golden; const char* prefix; SynthConfig cfg; };
  for (const Case& c : {Case{"golden/glm4moe-f32.gguf", "glm4moe.", glm4moe_golden_shape(GgmlType::F32)},
                        Case{"golden/deepseek2-f32.gguf", "deepseek2.", deepseek2_golden_shape(false, GgmlType::F32)},
                        Case{"golden/deepseek2-mtp-f32.gguf", "deepseek2.",
                             deepseek2_golden_shape(true, GgmlType::F32)}}) {
    if (!test::shared_has(c.golden)) GTEST_SKIP() << "shared golden " << c.golden << " absent";
    const auto golden = gguf::GgufModel::open(shared_path(c.golden));
    TempFile out("golden.gguf");
    synth_model(c.cfg, out.path.string(), 2);
    const auto m = gguf::GgufModel::open(out.path.string());
    EXPECT_EQ(tensors_of(m), tensors_of(golden)) << c.golden;
    expect_same_metadata(m, golden, c.prefix);
  }
}

// The quantized goldens went through llama-quantize, whose output order
// (tensors outside blk.N, then block by block, by name) is the one of
// published GGUFs; glm4moe-q8_0 (every matrix Q8_0) matches type for type.
TEST(SynthMoeArch, QuantizedGoldensGiveTensorOrderAndTypes) {
  for (const char* rel : {"golden/glm4moe-q8_0.gguf", "golden/deepseek2-q4_k.gguf"})
    if (!test::shared_has(rel)) GTEST_SKIP() << "shared golden " << rel << " absent";
  {
    const auto golden = gguf::GgufModel::open(shared_path("golden/glm4moe-q8_0.gguf"));
    TempFile out("glm_q8.gguf");
    synth_model(glm4moe_golden_shape(GgmlType::Q8_0), out.path.string(), 2);
    const auto m = gguf::GgufModel::open(out.path.string());
    ASSERT_EQ(m.tensors().size(), golden.tensors().size());
    for (size_t i = 0; i < m.tensors().size(); ++i) {
      EXPECT_EQ(m.tensors()[i].name, golden.tensors()[i].name) << i;
      EXPECT_EQ(m.tensors()[i].type, golden.tensors()[i].type) << golden.tensors()[i].name;
    }
  }
  {
    // Q4_K asked for everything: rows not a multiple of 256 fall back as in the
    // golden (attn_q_b's 128-wide rows: Q5_0; the 32-wide expert down rows of a
    // Q6_K: Q8_0 is the golden's, Q4_K gives Q5_0 here).
    const auto golden = gguf::GgufModel::open(shared_path("golden/deepseek2-q4_k.gguf"));
    TempFile out("ds_q4k.gguf");
    synth_model(deepseek2_golden_shape(false, GgmlType::Q4_K), out.path.string(), 2);
    const auto m = gguf::GgufModel::open(out.path.string());
    ASSERT_EQ(m.tensors().size(), golden.tensors().size());
    for (size_t i = 0; i < m.tensors().size(); ++i) EXPECT_EQ(m.tensors()[i].name, golden.tensors()[i].name) << i;
    EXPECT_EQ(m.require("blk.1.attn_q_b.weight").type, GgmlType::Q5_0);
    EXPECT_EQ(m.require("blk.1.attn_q_b.weight").type, golden.require("blk.1.attn_q_b.weight").type);
    EXPECT_EQ(m.require("blk.1.ffn_down_exps.weight").type, GgmlType::Q5_0);
    EXPECT_EQ(m.require("blk.1.ffn_gate_exps.weight").type, GgmlType::Q4_K);
  }
}

// ---- forward passes ---------------------------------------------------------------

std::vector<float> logits_of(const fs::path& model, int n_tokens) {
  TempFile out("logits.f32");
  auto [rc, log] = sluice_cli("logits -m " + model.string() + " --tokens 1,17,42,300 -o " + out.path.string());
  EXPECT_EQ(rc, 0) << log;
  std::vector<float> v(size_t(n_tokens) * 512);
  std::ifstream f(out.path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  EXPECT_TRUE(f) << "logits file too short";
  return v;
}

// Finite logits of O(1) spread (the random weights keep activations O(1):
// far from 0 and from overflow) that differ between positions.
void expect_sane_logits(const std::vector<float>& v, const std::string& what) {
  std::set<size_t> argmax;
  for (size_t p = 0; p < v.size() / 512; ++p) {
    double sum = 0, sq = 0;
    size_t best = 0;
    for (size_t i = 0; i < 512; ++i) {
      const float x = v[p * 512 + i];
      ASSERT_TRUE(std::isfinite(x)) << what;
      sum += x, sq += double{x} * x;
      if (x > v[p * 512 + best]) best = i;
    }
    const double sd = std::sqrt(sq / 512 - (sum / 512) * (sum / 512));
    EXPECT_GT(sd, 0.3) << what << " position " << p;
    EXPECT_LT(sd, 10.0) << what << " position " << p;
    argmax.insert(best);
  }
  EXPECT_GE(argmax.size(), 2u) << what;
}

// Tiny glm4moe (1 NextN block), deepseek2 (with --nextn 1; and with q
// LoRA off, i.e. attn_q) and deepseek4 (--nextn 1) run through the engine. A NextN block is not part of
// the trunk: the same file without it gives bitwise the same logits.
TEST(SynthMoeArch, TinyFilesRunAndNextnLeavesTheTrunkAlone) {
  for (const char* arch : {"glm4moe", "deepseek2"}) {
    TempFile with("with.gguf"), without("without.gguf");
    auto [rc, log] = sluice_cli(std::string("synth -q --arch ") + arch + " --nextn 1 -o " + with.path.string());
    ASSERT_EQ(rc, 0) << log;
    std::tie(rc, log) = sluice_cli(std::string("synth -q --arch ") + arch + " --nextn 0 -o " + without.path.string());
    ASSERT_EQ(rc, 0) << log;
    const auto m = gguf::GgufModel::open(with.path.string());
    EXPECT_EQ(m.metadata().require_uint(std::string(arch) + ".block_count"), 5u);  // 4 trunk + 1 NextN
    EXPECT_EQ(m.metadata().require_uint(std::string(arch) + ".nextn_predict_layers"), 1u);
    EXPECT_NE(m.find("blk.4.nextn.eh_proj.weight"), nullptr);
    EXPECT_EQ(m.find("blk.4.nextn.embed_tokens.weight") != nullptr, std::string(arch) == "deepseek2");
    EXPECT_EQ(gguf::GgufModel::open(without.path.string()).metadata().find(std::string(arch) + ".nextn_predict_layers"),
              nullptr);
    const auto a = logits_of(with.path, 4), b = logits_of(without.path, 4);
    expect_sane_logits(a, arch);
    EXPECT_EQ(a, b) << arch;
  }
  {  // deepseek4's 3 trunk blocks + blk.3, window-only (its compress ratio 0), with its own head
    TempFile with("d4with.gguf"), without("d4without.gguf");
    auto [rc, log] = sluice_cli("synth -q --arch deepseek4 --nextn 1 -o " + with.path.string());
    ASSERT_EQ(rc, 0) << log;
    std::tie(rc, log) = sluice_cli("synth -q --arch deepseek4 -o " + without.path.string());
    ASSERT_EQ(rc, 0) << log;
    const auto m = gguf::GgufModel::open(with.path.string());
    EXPECT_EQ(m.metadata().require_uint("deepseek4.block_count"), 4u);
    EXPECT_EQ(m.metadata().find("deepseek4.attention.compress_ratios")->array.back().i, 0);
    EXPECT_NE(m.find("blk.3.nextn.shared_head_head.weight"), nullptr);
    EXPECT_NE(m.find("blk.3.hc_ffn_fn.weight"), nullptr);
    EXPECT_EQ(m.find("blk.3.attn_compressor_kv.weight"), nullptr);
    EXPECT_EQ(logits_of(with.path, 4), logits_of(without.path, 4));
  }
  SynthConfig c = synth_preset("tiny", "deepseek2");
  c.q_lora_rank = 0;  // DeepSeek-V2-Lite style: attn_q, no q_lora_rank key
  TempFile f("noqlora.gguf");
  synth_model(c, f.path.string(), 2);
  const auto m = gguf::GgufModel::open(f.path.string());
  EXPECT_EQ(m.require("blk.1.attn_q.weight").ne, (std::vector<uint64_t>{128, 4 * 48}));
  EXPECT_EQ(m.find("blk.1.attn_q_a.weight"), nullptr);
  EXPECT_EQ(m.metadata().find("deepseek2.attention.q_lora_rank"), nullptr);
  expect_sane_logits(logits_of(f.path, 4), "deepseek2 without q LoRA");
}

TEST(SynthMoeArch, SizeEstimateIsExact) {
  for (const char* arch : {"glm4moe", "deepseek2"}) {
    const SynthConfig cfg = synth_preset("tiny", arch);
    TempFile out("size.gguf");
    const SynthResult r = synth_model(cfg, out.path.string(), 2);
    EXPECT_EQ(synth_sizes(cfg, 2).file_bytes, r.bytes) << arch;
    EXPECT_EQ(r.bytes, fs::file_size(out.path)) << arch;
  }
}

// ---- full-size tensor tables (zero-data) ---------------------------------------------

nlohmann::json inspect_zero_data(const std::string& args, const TempFile& out, const SynthConfig& cfg) {
  auto [rc, log] = sluice_cli("synth -q --zero-data -o " + out.path.string() + " " + args);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_EQ(fs::file_size(out.path), synth_sizes(cfg, 1).file_bytes) << args;
  struct stat st {};
  EXPECT_EQ(::stat(out.path.c_str(), &st), 0);
  EXPECT_LT(uint64_t(st.st_blocks) * 512, 64u << 20) << args << ": the tensor data should be a hole";
  std::tie(rc, log) = sluice_cli("inspect --json " + out.path.string());
  EXPECT_EQ(rc, 0) << log.substr(0, 2000);
  return nlohmann::json::parse(log);
}

uint64_t bytes_under(const nlohmann::json& j, const std::string& prefix) {
  uint64_t n = 0;
  for (const auto& t : j["tensors"])
    if (t["name"].get<std::string>().rfind(prefix, 0) == 0) n += t["bytes"].get<uint64_t>();
  return n;
}

// One expert of the DeepSeek-V3 shapes (n_embd 7168, expert FFN 2048): gate
// and up Q4_K = 7168/256*144 B * 2048 rows = 8257536 B each; down Q4_K (2048/256
// *144 * 7168) = 8257536 B, or Q6_K (2048/256*210 * 7168) = 12042240 B in the
// Q4_K_M use_more_bits blocks. So 24772608 B (23.62 MiB) or 28557312 B (27.23 MiB).
constexpr uint64_t kDsExpert = 3 * 8257536ull, kDsExpertQ6 = 2 * 8257536ull + 12042240ull;
// MLA KV cache: trunk layers x 4096 positions x (kv_lora 512 + rope 64) x 2 B.
constexpr uint64_t kDsKv = 61ull * 4096 * (512 + 64) * 2;

// deepseek-v3: 61 blocks, 3 dense, MoE blocks 3..60. use_more_bits(i, 61):
// i < 7, i >= 53, or (i - 7) % 3 == 2 -> MoE blocks 3-6 (4), 53-60 (8) and
// 9, 12, ..., 51 (15) = 27 with Q6_K down, 31 with Q4_K. Per token (top-8 in
// every MoE block): 8 * (27 * 28557312 + 31 * 24772608) = 12311986176 B
// (11741.6 MiB); all experts: 256 * (...) = 393983557632 B.
TEST(SynthMoeArch, DeepSeekV3TableSizing) {
  TempFile out("dsv3.gguf");
  const auto j = inspect_zero_data("--preset deepseek-v3", out, synth_preset("deepseek-v3"));
  EXPECT_EQ(j["architecture"], "deepseek2");
  EXPECT_EQ(j["block_count"], 61);
  EXPECT_EQ(j["metadata"]["deepseek2.leading_dense_block_count"], 3);
  EXPECT_EQ(j["metadata"]["deepseek2.expert_group_count"], 8);
  EXPECT_EQ(j["metadata"]["deepseek2.expert_group_used_count"], 4);
  EXPECT_EQ(j["metadata"]["deepseek2.attention.q_lora_rank"], 1536);
  EXPECT_EQ(j["metadata"]["deepseek2.attention.key_length"], 576);
  EXPECT_EQ(j["metadata"]["deepseek2.attention.key_length_mla"], 192);
  EXPECT_FLOAT_EQ(j["metadata"]["deepseek2.rope.scaling.yarn_log_multiplier"].get<float>(), 0.1f);
  EXPECT_FLOAT_EQ(j["metadata"]["deepseek2.rope.scaling.factor"].get<float>(), 40.0f);
  EXPECT_EQ(j["metadata"].count("deepseek2.nextn_predict_layers"), 0u);
  EXPECT_EQ(j["hyperparameters"]["vocab_size"], 129280);
  const auto& s = j["sizing"];
  EXPECT_EQ(s["top_k"], 8);
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 8 * (27 * kDsExpertQ6 + 31 * kDsExpert));
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 12311986176ull);
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 256 * (27 * kDsExpertQ6 + 31 * kDsExpert));
  EXPECT_EQ(s["kv_layout"], "mla-latent");
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), kDsKv);
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["dense_bytes"].get<uint64_t>() + j["expert_bytes"].get<uint64_t>(), s["total_bytes"].get<uint64_t>());
}

// deepseek-v3 --nextn 1 (the checkpoint's MTP block 61, as the MTP-capable
// converters write it): 62 blocks, the trunk's KV unchanged, and block 61 is
// not loaded. It is a use_more_bits block of 62 (61 >= 7*62/8 = 54), so by
// hand: attn_norm 28672 + q_a 4032*1536 = 6193152 + q_a_norm 6144 + q_b
// 864*24576 = 21233664 + kv_a_mqa 4032*576 = 2322432 + kv_a_norm 2048 + k_b
// Q5_0 (128-wide rows) 88*65536 = 5767168 + v_b 288*16384 = 4718592 + output
// 9216*7168 = 66060288 + ffn_norm 28672 + router 7168*256*4 = 7340032 +
// exp_probs_b 1024 + experts 256*28557312 = 7310671872 + shared gate/up
// 2*8257536 + down Q6_K 12042240 + eh_proj 8064*7168 = 57802752 + 3 norms
// 86016 + embed_tokens and shared_head_head 2 * 4032*129280 = 1042513920
// = 8553333760 B.
TEST(SynthMoeArch, DeepSeekV3NextnBlockIsNotLoaded) {
  SynthConfig cfg = synth_preset("deepseek-v3");
  cfg.n_nextn = 1;
  TempFile out("dsv3_mtp.gguf");
  const auto j = inspect_zero_data("--preset deepseek-v3 --nextn 1", out, cfg);
  EXPECT_EQ(j["block_count"], 62);
  EXPECT_EQ(j["metadata"]["deepseek2.nextn_predict_layers"], 1);
  const auto& s = j["sizing"];
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>(), 8553333760ull);
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>(), bytes_under(j, "blk.61."));
  EXPECT_EQ(s["kv_layout"], "mla-latent");
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), kDsKv);
}

// --layers cuts the trunk: 4 blocks = 3 dense + block 3, a use_more_bits
// block of 4 (3 >= 7*4/8 = 3): 256 experts of 28557312 B; 2 blocks = all
// dense (leading_dense_block_count follows the cut).
TEST(SynthMoeArch, DeepSeekV3LayerCut) {
  SynthConfig cfg = synth_preset("deepseek-v3");
  cfg.n_layer = 4;
  TempFile out("dsv3_4.gguf");
  auto j = inspect_zero_data("--preset deepseek-v3 --layers 4", out, cfg);
  EXPECT_EQ(j["block_count"], 4);
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 256 * kDsExpertQ6);
  EXPECT_EQ(j["sizing"]["kv_bytes"].get<uint64_t>(), 4ull * 4096 * 576 * 2);
  cfg.n_layer = 2;
  TempFile out2("dsv3_2.gguf");
  j = inspect_zero_data("--preset deepseek-v3 --layers 2", out2, cfg);
  EXPECT_EQ(j["metadata"]["deepseek2.leading_dense_block_count"], 2);
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 0u);
}

// kimi-k2: 61 blocks, 1 dense, MoE blocks 1..60; use_more_bits(i, 61) holds
// for 1-6 (6), 53-60 (8) and 9..51 step 3 (15) = 29 blocks, 31 without.
// Per token: 8 * (29 * 28557312 + 31 * 24772608) = 12768903168 B (12177.4 MiB);
// all experts: 384 * (...) = 612907352064 B. KV as deepseek-v3 (same MLA ranks).
TEST(SynthMoeArch, KimiK2TableSizing) {
  TempFile out("kimi.gguf");
  const auto j = inspect_zero_data("--preset kimi-k2", out, synth_preset("kimi-k2"));
  EXPECT_EQ(j["architecture"], "deepseek2");
  EXPECT_EQ(j["expert_count"], 384);
  EXPECT_EQ(j["metadata"]["deepseek2.attention.head_count"], 64);
  EXPECT_EQ(j["metadata"]["deepseek2.leading_dense_block_count"], 1);
  EXPECT_EQ(j["hyperparameters"]["vocab_size"], 163840);
  const auto& s = j["sizing"];
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 8 * (29 * kDsExpertQ6 + 31 * kDsExpert));
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 12768903168ull);
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 384 * (29 * kDsExpertQ6 + 31 * kDsExpert));
  EXPECT_EQ(s["kv_layout"], "mla-latent");
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), kDsKv);
}

// glm-4.5-air: 46 trunk blocks (1 dense) + NextN block 46; block_count 47.
// One expert (n_embd 4096, FFN 1408): gate/up Q4_K 4096/256*144 * 1408 =
// 3244032 B each; the 1408-wide down rows are no multiple of 256, so Q4_K
// falls back to Q5_0 (1408/32*22 * 4096 = 3964928 B) and, in use_more_bits
// blocks, Q6_K to Q8_0 (1408/32*34 * 4096 = 6127616 B): 10452992 B or
// 12615680 B. use_more_bits(i, 47) (i < 5, i >= 41, (i - 5) % 3 == 2) holds
// for MoE blocks 1-4 (4), 41-45 (5), 7..40 step 3 (12) = 21; 24 without.
// Per token: 8 * (21 * 12615680 + 24 * 10452992) = 4126408704 B (3935.2 MiB);
// all experts 128 * (...) = 66022539264 B. Block 46 (NextN, not loaded):
// attn_norm 16384 + q 6912*4096... summed by name below and by hand:
// 16384 + q 28311552 + q bias 49152 + k 2359296 + k bias 4096 + v Q6_K
// 3440640 + v bias 4096 + output 28311552 + post_attention_norm 16384 +
// router 2097152 + exp_probs_b 512 + experts 128*12615680 + shared gate/up
// 2*3244032 + shared down Q8_0 6127616 + eh_proj 4608*4096 = 18874368 + 3
// norms 49152 = 1710957056 B. KV per head: 46 x 4096 x 8 kv heads x 128 x 2
// (k and v) x 2 B = 771751936 B.
TEST(SynthMoeArch, Glm45AirTableSizing) {
  TempFile out("air.gguf");
  const auto j = inspect_zero_data("--preset glm-4.5-air", out, synth_preset("glm-4.5-air"));
  EXPECT_EQ(j["architecture"], "glm4moe");
  EXPECT_EQ(j["block_count"], 47);
  EXPECT_EQ(j["metadata"]["glm4moe.nextn_predict_layers"], 1);
  EXPECT_EQ(j["metadata"]["glm4moe.rope.dimension_count"], 64);
  const uint64_t qk_norms = bytes_under(j, "blk.1.attn_q_norm") + bytes_under(j, "blk.1.attn_k_norm");
  EXPECT_EQ(qk_norms, 0u);  // GLM-4.5-Air has no q/k norm
  const auto& s = j["sizing"];
  constexpr uint64_t kExpert = 2 * 3244032ull + 3964928ull, kExpertMore = 2 * 3244032ull + 6127616ull;
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 8 * (21 * kExpertMore + 24 * kExpert));
  EXPECT_EQ(s["token_demand_bytes"].get<uint64_t>(), 4126408704ull);
  EXPECT_EQ(j["expert_bytes"].get<uint64_t>(), 128 * (21 * kExpertMore + 24 * kExpert));
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>(), 1710957056ull);
  EXPECT_EQ(s["not_loaded_bytes"].get<uint64_t>(), bytes_under(j, "blk.46."));
  EXPECT_EQ(s["kv_layout"], "per-head");
  EXPECT_EQ(s["kv_bytes"].get<uint64_t>(), 46ull * 4096 * 8 * 128 * 2 * 2);
}

// ---- bad input ---------------------------------------------------------------------

TEST(SynthMoeArch, BadFlagsAreNamed) {
  struct Case { const char* args; const char* flag; const char* what; };
  for (const Case& c : {Case{"--arch qwen3moe --nextn 1", "--nextn", "qwen3moe files carry no NextN/MTP blocks"},
                        Case{"--preset deepseek-v3 --layers 62", "--layers", "1..61"},
                        Case{"--preset glm-4.5-air --arch deepseek2", "--arch", "glm4moe"},
                        Case{"--arch deepseek2 --experts 10", "--experts", "expert groups"},
                        Case{"--arch glm4moe --head-dim 8", "--head-dim", "rope"}}) {
    TempFile out("bad.gguf");
    auto [rc, log] = sluice_cli("synth -q -o " + out.path.string() + " " + c.args);
    EXPECT_EQ(rc, 1) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.flag), std::string::npos) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.what), std::string::npos) << c.args << "\n" << log;
    EXPECT_FALSE(fs::exists(out.path)) << c.args;
  }
}

}  // namespace
}  // namespace sluice::tools
