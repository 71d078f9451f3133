// Tests for src/tools: synth (layout, metadata, determinism, routing skew,
// direct blocks), model_info sizing (worked out by hand from block sizes), and
// the inspect CLI on the shared reference models.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "io/file.h"
#include "kernels/quant.h"
#include "tools/inspect_report.h"
#include "tools/model_info.h"
#include "tools/routing_probe.h"
#include "tools/synth.h"
#include "tools/synth_plan.h"
#include "tools/synth_random.h"
#include "util/error.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
const std::string kShared = SLUICE_SHARED_DIR;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("sluice_tools_test_" + std::to_string(::getpid()) + "_" + name);
}

struct TempFile {
  explicit TempFile(const std::string& name) : path(temp_path(name)) {}
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  fs::path path;
};

std::vector<char> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Runs the sluice binary; returns {exit status, stdout+stderr}.
std::pair<int, std::string> run_sluice(const std::string& args) {
  const std::string cmd = std::string(SLUICE_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(p.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

void skip_unless_exists(const std::string& path) {
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
}

// ---- synth layout ----------------------------------------------------------------

TEST(ToolsSynth, TinyPresetHasQwen3MoeNamesShapesTypesAndMetadata) {
  TempFile out("tiny.gguf");
  const SynthConfig cfg = synth_preset("tiny");
  const SynthResult r = synth_model(cfg, out.path.string(), 2);
  const auto m = gguf::GgufModel::open(out.path.string());
  EXPECT_EQ(r.bytes, fs::file_size(out.path));
  EXPECT_FALSE(r.direct);

  const auto& md = m.metadata();
  EXPECT_EQ(m.architecture(), "qwen3moe");
  EXPECT_EQ(md.require_uint("qwen3moe.block_count"), 4u);
  EXPECT_EQ(md.require_uint("qwen3moe.embedding_length"), 128u);
  EXPECT_EQ(md.require_uint("qwen3moe.expert_count"), 16u);
  EXPECT_EQ(md.require_uint("qwen3moe.expert_used_count"), 4u);
  EXPECT_EQ(md.require_uint("qwen3moe.expert_feed_forward_length"), 128u);
  EXPECT_EQ(md.require_uint("qwen3moe.attention.head_count"), 4u);
  EXPECT_EQ(md.require_uint("qwen3moe.attention.head_count_kv"), 2u);
  EXPECT_EQ(md.require_uint("qwen3moe.attention.key_length"), 32u);
  EXPECT_EQ(md.require_uint("qwen3moe.attention.value_length"), 32u);
  EXPECT_EQ(md.require_uint("qwen3moe.context_length"), 4096u);
  EXPECT_FLOAT_EQ(static_cast<float>(md.require_float("qwen3moe.rope.freq_base")), 1e6f);
  EXPECT_FLOAT_EQ(static_cast<float>(md.require_float("qwen3moe.attention.layer_norm_rms_epsilon")), 1e-6f);
  EXPECT_EQ(md.require_uint("general.file_type"), 2u);  // MOSTLY_Q4_0
  EXPECT_EQ(md.require_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(md.require_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(md.get_string_array("tokenizer.ggml.tokens")->size(), 512u);

  struct Want { std::string name; GgmlType type; std::vector<uint64_t> ne; };
  std::vector<Want> want = {{"token_embd.weight", GgmlType::Q8_0, {128, 512}}};
  for (int l = 0; l < 4; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    want.push_back({b + "attn_k.weight", GgmlType::Q8_0, {128, 64}});
    want.push_back({b + "attn_k_norm.weight", GgmlType::F32, {32}});
    want.push_back({b + "attn_norm.weight", GgmlType::F32, {128}});
    want.push_back({b + "attn_output.weight", GgmlType::Q8_0, {128, 128}});
    want.push_back({b + "attn_q.weight", GgmlType::Q8_0, {128, 128}});
    want.push_back({b + "attn_q_norm.weight", GgmlType::F32, {32}});
    want.push_back({b + "attn_v.weight", GgmlType::Q8_0, {128, 64}});
    want.push_back({b + "ffn_down_exps.weight", GgmlType::Q4_0, {128, 128, 16}});
    want.push_back({b + "ffn_gate_exps.weight", GgmlType::Q4_0, {128, 128, 16}});
    want.push_back({b + "ffn_gate_inp.weight", GgmlType::F32, {128, 16}});
    want.push_back({b + "ffn_norm.weight", GgmlType::F32, {128}});
    want.push_back({b + "ffn_up_exps.weight", GgmlType::Q4_0, {128, 128, 16}});
  }
  want.push_back({"output_norm.weight", GgmlType::F32, {128}});
  want.push_back({"output.weight", GgmlType::Q8_0, {128, 512}});
  ASSERT_EQ(m.tensors().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(m.tensors()[i].name, want[i].name);
    EXPECT_EQ(m.tensors()[i].type, want[i].type) << want[i].name;
    EXPECT_EQ(m.tensors()[i].ne, want[i].ne) << want[i].name;
  }
}

// The golden qwen3moe file was made by llama.cpp's tooling: a synth model of the
// same shape must have exactly its tensor names, shapes and (all-F32) types.
TEST(ToolsSynth, MatchesLlamaCppGoldenTensorLayout) {
  const std::string json_path = kShared + "/golden/qwen3moe-f32.json";
  skip_unless_exists(json_path);
  const auto golden = nlohmann::json::parse(std::ifstream(json_path));
  SynthConfig cfg = synth_preset("tiny");
  cfg.n_layer = 3, cfg.n_embd = 256, cfg.n_ff_exp = 256, cfg.head_dim = 64, cfg.n_head = 4, cfg.n_head_kv = 2;
  cfg.expert_type = cfg.down_type = cfg.attn_type = cfg.attn_v_type = cfg.embd_type = cfg.output_type = GgmlType::F32;
  TempFile out("golden_shape.gguf");
  synth_model(cfg, out.path.string(), 2);
  const auto m = gguf::GgufModel::open(out.path.string());
  std::set<std::tuple<std::string, std::string, std::vector<uint64_t>>> ours, theirs;
  for (const auto& t : m.tensors()) ours.insert({t.name, std::string(ggml_type_name(t.type)), t.ne});
  for (const auto& t : golden["tensor_types"])
    theirs.insert({t[0].get<std::string>(), t[1].get<std::string>(), t[2].get<std::vector<uint64_t>>()});
  EXPECT_EQ(ours, theirs);
  // Every qwen3moe.* key of the golden file exists in ours with the same type.
  const auto g = gguf::GgufModel::open(kShared + "/golden/qwen3moe-f32.gguf");
  for (const auto& [k, v] : g.metadata().entries()) {
    if (k.rfind("qwen3moe.", 0) != 0) continue;
    const gguf::Value* mine = m.metadata().find(k);
    ASSERT_NE(mine, nullptr) << k;
    EXPECT_EQ(mine->type, v.type) << k;
  }
}

TEST(ToolsSynth, BytesDependOnSeedButNotOnThreadCount) {
  SynthConfig cfg = synth_preset("tiny");
  cfg.n_embd = 256, cfg.n_ff_exp = 256, cfg.n_layer = 2;
  cfg.expert_type = cfg.down_type = GgmlType::Q4_K;  // exercises the K-quant quantizer too
  cfg.attn_v_type = GgmlType::Q6_K;
  TempFile a("det_a.gguf"), b("det_b.gguf"), c("det_c.gguf");
  synth_model(cfg, a.path.string(), 1);
  synth_model(cfg, b.path.string(), 3);
  cfg.seed += 1;
  synth_model(cfg, c.path.string(), 2);
  const auto ba = slurp(a.path), bb = slurp(b.path), bc = slurp(c.path);
  ASSERT_GT(ba.size(), 1000000u);
  EXPECT_TRUE(ba == bb);
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_FALSE(ba == bc);
}

TEST(ToolsSynth, DirectModeIsAlsoThreadIndependent) {
  SynthConfig cfg = synth_preset("tiny");
  cfg.quant_mode = QuantMode::Direct;
  TempFile a("dir_a.gguf"), b("dir_b.gguf");
  EXPECT_TRUE(synth_model(cfg, a.path.string(), 1).direct);
  synth_model(cfg, b.path.string(), 4);
  EXPECT_TRUE(slurp(a.path) == slurp(b.path));
}

// Exact mode writes quantize(float_row) for each row, in row order.
TEST(ToolsSynth, ExactRowsDequantizeToTheGeneratedFloats) {
  const SynthConfig cfg = synth_preset("tiny");
  TempFile out("rows.gguf");
  synth_model(cfg, out.path.string(), 2);
  const auto m = gguf::GgufModel::open(out.path.string());
  const SynthPlan plan = synth_plan(cfg);
  const RowGenerator gen(cfg, cfg.n_embd, cfg.n_layer, cfg.n_expert);
  auto file = io::open_file(out.path.string());
  for (const char* name : {"blk.1.ffn_up_exps.weight", "blk.2.ffn_gate_inp.weight", "token_embd.weight"}) {
    const PlannedTensor* pt = nullptr;
    for (const auto& t : plan.tensors)
      if (t.name == name) pt = &t;
    ASSERT_NE(pt, nullptr);
    const gguf::TensorInfo& ti = m.require(name);
    const uint64_t n = ti.ne[0];
    for (uint64_t row : {uint64_t{0}, ti.n_rows() / 2, ti.n_rows() - 1}) {
      std::vector<uint8_t> raw(ti.row_bytes());
      file->read_exact(raw.data(), raw.size(), ti.offset + row * ti.row_bytes());
      std::vector<float> got(n), want(n);
      kernels::dequantize_row(ti.type, raw.data(), got.data(), static_cast<int64_t>(n));
      gen.float_row(*pt, row, want.data());
      double err = 0, norm = 0;
      for (uint64_t i = 0; i < n; ++i) err += (got[i] - want[i]) * (got[i] - want[i]), norm += want[i] * want[i];
      EXPECT_LT(std::sqrt(err / norm), ti.type == GgmlType::F32 ? 1e-7 : 0.15) << name << " row " << row;
    }
  }
}

TEST(ToolsSynth, DirectBlocksHaveZeroMeanAndTargetStd) {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::MXFP4}) {
    ASSERT_TRUE(direct_block_supported(t));
    const int64_t n = 1 << 18;
    const float target = 0.03f;
    std::vector<uint8_t> raw(*ggml_row_bytes(t, n));
    Rng rng(7);
    generate_direct_row(t, rng, target, raw.data(), n);
    std::vector<float> v(n);
    kernels::dequantize_row(t, raw.data(), v.data(), n);
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += double{x} * x;
    const double mean = sum / n, std = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(std, target, 0.02 * target) << ggml_type_name(t);
    EXPECT_LT(std::abs(mean), 0.01 * target) << ggml_type_name(t);
  }
  EXPECT_FALSE(direct_block_supported(GgmlType::F32));
}

// Layer-0 routing on the embeddings must be skewed: hot experts, as in real
// models. With --routing-skew 0 it is close to uniform (the skew is ours).
TEST(ToolsSynth, RoutingIsSkewedTowardsHotExperts) {
  SynthConfig cfg = synth_preset("tiny");
  TempFile a("route.gguf"), b("route_flat.gguf");
  synth_model(cfg, a.path.string(), 2);
  const RoutingStats st = probe_routing(gguf::GgufModel::open(a.path.string()), 0);
  EXPECT_EQ(st.n_tokens, 512u);
  EXPECT_EQ(st.top_k, 4u);
  uint64_t total = 0;
  for (auto h : st.hits) total += h;
  EXPECT_EQ(total, 512u * 4u);
  std::printf("routing: top expert share %.3f (uniform %.4f)\n", st.top_share(), st.uniform_share());
  EXPECT_GT(st.top_share(), 2.0 * st.uniform_share());

  cfg.routing_skew = 0;
  synth_model(cfg, b.path.string(), 2);
  const RoutingStats flat = probe_routing(gguf::GgufModel::open(b.path.string()), 0);
  std::printf("routing (skew 0): top expert share %.3f\n", flat.top_share());
  EXPECT_LT(flat.top_share(), st.top_share());
}

TEST(ToolsSynth, BuiltinVocabIsConsistentBpe) {
  const BuiltinVocab& v = builtin_vocab();
  ASSERT_EQ(v.tokens.size(), 512u);
  EXPECT_EQ(v.merges.size(), 253u);
  EXPECT_EQ(v.tokens[0], "!");      // GPT-2 order: printable bytes first
  EXPECT_EQ(v.tokens[188], "\xC4\x80");  // byte 0x00 -> U+0100
  std::set<std::string> toks(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(toks.size(), v.tokens.size());
  EXPECT_TRUE(toks.count("\xC4\xA0"));  // 'Ġ' (space)
  for (const auto& m : v.merges) {
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos);
    EXPECT_TRUE(toks.count(m.substr(0, sp))) << m;
    EXPECT_TRUE(toks.count(m.substr(sp + 1))) << m;
    EXPECT_TRUE(toks.count(m.substr(0, sp) + m.substr(sp + 1))) << m;
  }
  EXPECT_EQ(v.tokens[v.bos], "<|endoftext|>");
  EXPECT_EQ(v.tokens[v.eos], "<|im_end|>");
  EXPECT_EQ(v.token_types[v.eos], 3);
}

TEST(ToolsSynth, VocabPadsWithUnusedExtras) {
  uint32_t n = 0;
  auto md = synth_vocab("", 600, &n);
  EXPECT_EQ(n, 600u);
  for (auto& [k, v] : md) {
    if (k == "tokenizer.ggml.tokens") {
      ASSERT_EQ(v.array.size(), 600u);
      EXPECT_EQ(v.array[512].s, "<|extra_0|>");
      EXPECT_EQ(v.array[599].s, "<|extra_87|>");
    }
    if (k == "tokenizer.ggml.token_type") {
      ASSERT_EQ(v.array.size(), 600u);
      EXPECT_EQ(v.array[599].i, 5);
    }
  }
  EXPECT_THROW(synth_vocab("", 100, &n), Error);
}

TEST(ToolsSynth, VocabFileTokenizerIsCopied) {
  const std::string path = kShared + "/vocab/ggml-vocab-gpt2-pre-qwen2.gguf";
  skip_unless_exists(path);
  SynthConfig cfg = synth_preset("tiny");
  cfg.vocab_path = path;
  cfg.n_vocab = 0;
  cfg.n_layer = 1;
  TempFile out("vocab.gguf");
  synth_model(cfg, out.path.string(), 2);
  const auto m = gguf::GgufModel::open(out.path.string());
  const auto src = gguf::GgufModel::open(path);
  EXPECT_EQ(m.require("token_embd.weight").ne[1], 50257u);
  for (const char* k : {"tokenizer.ggml.model", "tokenizer.ggml.pre"})
    EXPECT_EQ(m.metadata().get_string(k), src.metadata().get_string(k));
  EXPECT_EQ(m.metadata().get_string_array("tokenizer.ggml.merges")->size(), 50000u);
}

TEST(ToolsSynth, InvalidConfigsNameTheFlag) {
  SynthConfig cfg = synth_preset("tiny");
  cfg.expert_type = cfg.down_type = GgmlType::Q4_K;  // 128-wide rows cannot be Q4_K
  TempFile out("bad.gguf");
  try {
    synth_model(cfg, out.path.string(), 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--type"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out.path));
  cfg = synth_preset("tiny");
  cfg.n_expert_used = 20;
  EXPECT_THROW(synth_model(cfg, out.path.string(), 1), Error);
  cfg = synth_preset("tiny");
  cfg.arch = "falcon";
  EXPECT_THROW(synth_model(cfg, out.path.string(), 1), Error);
  EXPECT_THROW(synth_preset("huge"), Error);
}

// ---- model_info ------------------------------------------------------------------

// Tiny preset by hand. Q4_0 row of 128 = 4 blocks * 18 B = 72 B; Q8_0 row of
// 128 = 4 * 34 = 136 B.
//  experts/layer: 3 tensors * (128 * 16 rows) * 72 = 442368; one expert 27648.
//  dense: token_embd + output 2 * 512 * 136 = 139264, output_norm 512; per layer
//  attn_k/v 2 * 64 * 136, attn_q/o 2 * 128 * 136, q/k norm 2 * 128, attn/ffn norm
//  2 * 512, router 128 * 16 * 4 = 61696 -> dense = 139264 + 512 + 4 * 61696.
TEST(ToolsModelInfo, TinyPresetSizingByHand) {
  TempFile out("sizing.gguf");
  synth_model(synth_preset("tiny"), out.path.string(), 2);
  const ModelInfo info = model_info(gguf::GgufModel::open(out.path.string()));
  const Sizing& s = info.sizing;
  EXPECT_EQ(s.expert_bytes, 4u * 442368u);
  EXPECT_EQ(s.dense_bytes, 386560u);
  ASSERT_EQ(s.layers.size(), 4u);
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.per_expert_bytes, 27648u);
    EXPECT_EQ(l.n_expert, 16u);
  }
  EXPECT_EQ(s.top_k, 4u);
  EXPECT_EQ(s.token_demand_bytes, 4u * 4u * 27648u);
  EXPECT_EQ(s.layer_demand_bytes, 4u * 27648u);
  // A decode token reads one row (136 B) of token_embd (512 rows; output.weight
  // is separate) and every other dense byte, plus its routed experts.
  EXPECT_EQ(s.decode_read_bytes, 386560u - 512u * 136u + 136u + 4u * 4u * 27648u);
  EXPECT_EQ(s.kv_bytes, 4u * 4096u * 2u * (32u + 32u) * 2u);  // 4194304
  EXPECT_EQ(s.scratch_bytes, 4u * (512u + 4u * 4096u + 8u * 128u + 3u * 4u * 128u));
  EXPECT_EQ(s.min_ram_bytes, 386560u + 110592u + 4194304u + 77824u);
  EXPECT_EQ(info.hp.vocab_size, 512u);
  EXPECT_EQ(info.tokenizer.n_tokens, 512u);
  EXPECT_EQ(info.tokenizer.n_merges, 253u);
  EXPECT_EQ(info.tokenizer.bos_id, 509u);
  EXPECT_EQ(info.tokenizer.eos_id, 511u);
  EXPECT_EQ(info.hp.head_dim_k, 32u);
}

TEST(ToolsModelInfo, DenseModelHasNoExpertFigures) {
  const std::string path = kShared + "/golden/llama-dense-f16.gguf";
  skip_unless_exists(path);
  const ModelInfo info = model_info(gguf::GgufModel::open(path));
  EXPECT_EQ(info.architecture, "llama");
  EXPECT_EQ(info.sizing.expert_bytes, 0u);
  EXPECT_EQ(info.sizing.token_demand_bytes, 0u);
  EXPECT_TRUE(info.sizing.layers.empty());
  EXPECT_EQ(info.sizing.dense_bytes, info.sizing.total_bytes);
  EXPECT_GT(info.sizing.min_ram_bytes, info.sizing.dense_bytes);
}

// A hybrid stack names its layers' mixers; uniform stacks print no such line.
TEST(ToolsModelInfo, HybridStackShowsItsLayerMixers) {
  const std::string path = kShared + "/golden/qwen35moe-f32.gguf";
  skip_unless_exists(path);
  const ModelInfo info = model_info(gguf::GgufModel::open(path));
  EXPECT_TRUE(info.not_runnable.empty()) << info.not_runnable;
  EXPECT_EQ(info.layer_mixers, "gated-deltanet x6, attention x2 (blk 3, 7)");
  EXPECT_NE(inspect_text(info, false).find("layer mixers"), std::string::npos);
  const std::string mtp = kShared + "/golden/qwen35moe-mtp-f32.gguf";
  EXPECT_EQ(model_info(gguf::GgufModel::open(mtp)).layer_mixers, "gated-deltanet x3, attention x1 (blk 3)");
  const std::string uniform = kShared + "/golden/qwen3moe-f32.gguf";
  EXPECT_EQ(model_info(gguf::GgufModel::open(uniform)).layer_mixers, "");
}

// No general.architecture, one odd expert-like tensor: report what is there.
TEST(ToolsModelInfo, UnknownArchitectureReportsWhatIsThere) {
  TempFile out("noarch.gguf");
  {
    gguf::Writer w(out.path.string());
    w.add_metadata("general.name", gguf::Value::from_string("mystery"));
    w.add_tensor("blk.0.ffn_up_exps.weight", GgmlType::F32, {8, 4, 2});
    w.add_tensor("other.weight", GgmlType::F32, {8});
    w.write_header();
    std::vector<float> zeros(64, 0.0f);
    w.write_tensor_data(zeros.data(), 64 * 4);
    w.write_tensor_data(zeros.data(), 8 * 4);
    w.finish();
  }
  const ModelInfo info = model_info(gguf::GgufModel::open(out.path.string()));
  EXPECT_EQ(info.architecture, "");
  EXPECT_EQ(info.file.name, "mystery");
  EXPECT_FALSE(info.hp.embedding_length.has_value());
  EXPECT_EQ(info.hp.block_count, 1u);  // from the tensor names
  EXPECT_EQ(info.sizing.expert_bytes, 256u);
  EXPECT_EQ(info.sizing.dense_bytes, 32u);
  ASSERT_EQ(info.sizing.layers.size(), 1u);
  EXPECT_EQ(info.sizing.layers[0].per_expert_bytes, 128u);
  EXPECT_EQ(info.sizing.token_demand_bytes, 0u);  // no expert_used_count
  const auto j = inspect_json(info, gguf::GgufModel::open(out.path.string()).metadata());
  EXPECT_TRUE(j["expert_count"].is_null());
  EXPECT_EQ(j["tensors"].size(), 2u);
  EXPECT_FALSE(inspect_text(info, true).empty());
}

// ---- inspect CLI -----------------------------------------------------------------

nlohmann::json inspect_json_of(const std::string& path) {
  const auto [rc, out] = run_sluice("inspect --json " + path);
  EXPECT_EQ(rc, 0) << out;
  return nlohmann::json::parse(out);
}

// Q4_0 row of 256 = 8 * 18 = 144 B: one expert tensor {256,256,16} = 4096 rows
// = 589824 B; a layer's three = 1769472; one expert = 110592. Q8_0 row of 256 =
// 272 B. Dense: embd + output 2 * 512 * 272, output_norm 1024, per layer attn_q/o
// 2 * 256 * 272 + attn_k/v 2 * 128 * 272 + norms 2 * 256 + 2 * 1024 + router
// 256 * 16 * 4 = 227840.
TEST(ToolsInspect, GoldenQ8Q4JsonFigures) {
  const std::string path = kShared + "/golden/qwen3moe-q8_0-q4_0.gguf";
  skip_unless_exists(path);
  const auto j = inspect_json_of(path);
  EXPECT_EQ(j["architecture"], "qwen3moe");
  EXPECT_EQ(j["block_count"], 3);
  EXPECT_EQ(j["expert_count"], 16);
  EXPECT_EQ(j["expert_used_count"], 4);
  EXPECT_EQ(j["embedding_length"], 256);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["expert_bytes"], 3 * 1769472);
  EXPECT_EQ(j["dense_bytes"], 2 * 512 * 272 + 1024 + 3 * 227840);
  EXPECT_DOUBLE_EQ(j["token_demand_MiB"].get<double>(), 3.0 * 4 * 110592 / 1048576.0);
  EXPECT_DOUBLE_EQ(j["layer_demand_MiB"].get<double>(), 4.0 * 110592 / 1048576.0);
  const double kv = 3.0 * 4096 * 2 * (64 + 64) * 2, scratch = 4.0 * (512 + 4 * 4096 + 8 * 256 + 3 * 4 * 256);
  EXPECT_DOUBLE_EQ(j["min_ram_MiB"].get<double>(), (963072.0 + 442368 + kv + scratch) / 1048576.0);
  ASSERT_EQ(j["tensors"].size(), 39u);
  bool found = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "blk.0.ffn_down_exps.weight") {
      found = true;
      EXPECT_EQ(t["type"], "Q4_0");
      EXPECT_EQ(t["shape"], nlohmann::json({256, 256, 16}));
      EXPECT_EQ(t["offset"].get<uint64_t>() % 32, 0u);
      EXPECT_EQ(t["bytes"], 589824);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["hyperparameters"]["head_count_kv"], 2);
  EXPECT_EQ(j["metadata"]["qwen3moe.rope.freq_base"], 1e6);
}

// stories-moe-8x (llama, Q8_0): Q8_0 rows of 64 = 68 B, of 192 = 204 B. One
// expert tensor = 192 * 8 rows * 68 = 104448 (down: 64 * 8 * 204, the same);
// one expert 3 * 104448 / 8 = 39168. No key_length: head dim 64 / 8 = 8.
TEST(ToolsInspect, StoriesMoeJsonFigures) {
  const std::string path = kShared + "/models/stories-moe-8x-q8_0.gguf";
  skip_unless_exists(path);
  const auto j = inspect_json_of(path);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["block_count"], 5);
  EXPECT_EQ(j["expert_count"], 8);
  EXPECT_EQ(j["expert_used_count"], 2);
  EXPECT_EQ(j["embedding_length"], 64);
  EXPECT_EQ(j["vocab_size"], 512);
  EXPECT_EQ(j["expert_bytes"], 5 * 3 * 104448);
  EXPECT_EQ(j["dense_bytes"], 2 * 512 * 68 + 256 + 5 * (2 * 64 * 68 + 2 * 32 * 68 + 2 * 256 + 64 * 8 * 4));
  EXPECT_EQ(j["sizing"]["token_demand_bytes"], 5 * 2 * 39168);
  EXPECT_EQ(j["sizing"]["layer_demand_bytes"], 2 * 39168);
  // KV at the context `run` uses without -c: min(512 trained, 4096).
  EXPECT_EQ(j["sizing"]["kv_context"], 512);
  EXPECT_EQ(j["sizing"]["kv_bytes"], 5 * 512 * 4 * (8 + 8) * 2);
  EXPECT_EQ(j["hyperparameters"]["head_dim_k"], 8);
  EXPECT_EQ(j["tensors"].size(), 53u);
}

TEST(ToolsInspect, HumanOutputShowsSummaryAndFamilies) {
  const std::string path = kShared + "/golden/qwen3moe-q8_0-q4_0.gguf";
  skip_unless_exists(path);
  auto [rc, out] = run_sluice("inspect " + path);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("qwen3moe"), std::string::npos);
  EXPECT_NE(out.find("blk.N.ffn_up_exps.weight           x3"), std::string::npos) << out;
  EXPECT_NE(out.find("min RAM"), std::string::npos);
  std::tie(rc, out) = run_sluice("inspect --tensors " + path);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("blk.2.ffn_up_exps.weight"), std::string::npos);
}

TEST(ToolsInspect, ErrorsNameTheFile) {
  const std::string missing = temp_path("does_not_exist.gguf").string();
  EXPECT_THROW(gguf::GgufModel::open(missing), Error);
  auto [rc, out] = run_sluice("inspect " + missing);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(missing), std::string::npos) << out;

  TempFile junk("junk.gguf");
  std::ofstream(junk.path) << "this is not a GGUF file at all, just some text\n";
  try {
    gguf::GgufModel::open(junk.path.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(junk.path.string()), std::string::npos) << e.what();
  }
  std::tie(rc, out) = run_sluice("inspect --json " + junk.path.string());
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find(junk.path.string()), std::string::npos) << out;
}

TEST(ToolsInspect, SynthCliRoundTrip) {
  TempFile out("cli.gguf");
  auto [rc, log] = run_sluice("synth -q --force -o " + out.path.string() + " --preset tiny --layers 2 --experts 8 "
                              "--experts-used 2 --threads 2 --seed 5");
  ASSERT_EQ(rc, 0) << log;
  const auto j = inspect_json_of(out.path.string());
  EXPECT_EQ(j["block_count"], 2);
  EXPECT_EQ(j["expert_count"], 8);
  EXPECT_EQ(j["expert_used_count"], 2);
  std::tie(rc, log) = run_sluice("synth -o " + out.path.string() + " --type Q9_9");
  EXPECT_NE(rc, 0);
  EXPECT_NE(log.find("--type"), std::string::npos) << log;
}

}  // namespace
}  // namespace sluice::tools
