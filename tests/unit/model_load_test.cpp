// Loading errors on synthetic GGUF files, session continuation, and the
// `sluice logits` CLI writing exactly what the library computes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gguf/writer.h"
#include "model_test_support.h"
#include "runtime/session.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

struct TinySpec {
  std::string arch = "llama";
  GgmlType attn_q_type = GgmlType::F32;
  uint64_t attn_k_rows = 128;  // n_head_kv * head_dim = 2 * 64
  bool head_count = true;
  uint32_t block_count = 1;
  std::vector<std::pair<std::string, gguf::Value>> extra_metadata;  // appended as given
  struct Extra {
    std::string name;
    std::vector<uint64_t> ne;
  };
  std::vector<Extra> extra_tensors;  // F32 zeros
};

// A 1-layer dense llama (n_embd 256, 4 heads of 64, 2 KV heads, FFN 256,
// vocab 8) with all-zero weights, written to a temp file.
std::string write_tiny(const TinySpec& s, const std::string& name) {
  const std::string path = process_temp_path("model_" + name + ".gguf");
  gguf::Writer w(path);
  const std::string a = s.arch;
  w.add_metadata("general.architecture", gguf::Value::from_string(a));
  w.add_metadata(a + ".block_count", gguf::Value::from_u32(s.block_count));
  w.add_metadata(a + ".embedding_length", gguf::Value::from_u32(256));
  if (s.head_count) w.add_metadata(a + ".attention.head_count", gguf::Value::from_u32(4));
  w.add_metadata(a + ".attention.head_count_kv", gguf::Value::from_u32(2));
  w.add_metadata(a + ".feed_forward_length", gguf::Value::from_u32(256));
  w.add_metadata(a + ".context_length", gguf::Value::from_u32(64));
  for (const auto& [k, v] : s.extra_metadata) w.add_metadata(a + "." + k, v);
  struct T { std::string n; GgmlType t; std::vector<uint64_t> ne; };
  std::vector<T> ts = {
      {"token_embd.weight", GgmlType::F32, {256, 8}},
      {"output_norm.weight", GgmlType::F32, {256}},
      {"blk.0.attn_norm.weight", GgmlType::F32, {256}},
      {"blk.0.ffn_norm.weight", GgmlType::F32, {256}},
      {"blk.0.attn_q.weight", s.attn_q_type, {256, 256}},
      {"blk.0.attn_k.weight", GgmlType::F32, {256, s.attn_k_rows}},
      {"blk.0.attn_v.weight", GgmlType::F32, {256, 128}},
      {"blk.0.attn_output.weight", GgmlType::F32, {256, 256}},
      {"blk.0.ffn_gate.weight", GgmlType::F32, {256, 256}},
      {"blk.0.ffn_up.weight", GgmlType::F32, {256, 256}},
      {"blk.0.ffn_down.weight", GgmlType::F32, {256, 256}},
  };
  for (const auto& e : s.extra_tensors) ts.push_back({e.name, GgmlType::F32, e.ne});
  for (const auto& t : ts) w.add_tensor(t.n, t.t, t.ne);
  w.write_header();
  for (const auto& t : ts) {
    uint64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    std::vector<uint8_t> zeros(*ggml_row_bytes(t.t, t.ne[0]) * rows, 0);
    w.write_tensor_data(zeros.data(), zeros.size());
  }
  w.finish();
  return path;
}

// The message of the Error loading `path` throws ("" when it loads).
std::string load_error(const std::string& path, const model::ModelConfig& cfg = golden_config()) {
  try {
    load(path, cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// llama.cpp limits expert selection to groups for any architecture whose
// file sets expert_group_count > 1: one whose description does not read the
// keys refuses the file rather than route otherwise.
TEST(ModelLoad, ExpertGroupsAreRefusedWhereTheArchitectureDoesNotReadThem) {
  REQUIRE_SHARED("golden/qwen3moe-f32.gguf");
  const std::string path = process_temp_path("model_groups.gguf");
  write_edited_gguf(shared_path("golden/qwen3moe-f32.gguf"), path, "qwen3moe.expert_group_count",
                    gguf::Value::from_u32(4), true);
  const std::string error = load_error(path);
  std::filesystem::remove(path);
  EXPECT_EQ(error, path + ": invalid metadata qwen3moe.expert_group_count: 4 groups: group-limited expert selection is "
                          "not supported for qwen3moe");
}

TEST(ModelLoad, TinyZeroModelGivesUniformLogits) {
  auto m = load(write_tiny({}, "ok"), golden_config());
  std::vector<float> logits(2 * 8);
  const std::vector<int32_t> toks = {1, 2};
  m->eval(toks, 0, logits.data());
  for (float v : logits) EXPECT_EQ(v, 0.0f);  // zero lm head
  const std::vector<int32_t> bad = {8};
  EXPECT_THROW(m->eval(bad, 2, logits.data()), Error);
  EXPECT_THROW(m->eval(toks, 5, logits.data()), Error);  // skips cached positions
}

TEST(ModelLoad, UnsupportedArchitecture) {
  TinySpec s;
  s.arch = "mamba";
  const std::string path = write_tiny(s, "arch");
  EXPECT_EQ(load_error(path), path + ": unsupported architecture mamba (supported: bailingmoe3, deepseek2, deepseek4, gemma4, glm-dsa, glm4moe, gpt-oss, lfm2moe, llama, qwen2moe, qwen35moe, qwen3moe)");
}

// A tensor no block of the architecture takes is an error naming it (a llama
// layer has no q bias: loading it silently would compute another model).
TEST(ModelLoad, UnclaimedTensorIsNamed) {
  TinySpec s;
  s.extra_tensors.push_back({"blk.0.attn_q.bias", {256}});
  const std::string path = write_tiny(s, "unclaimed");
  EXPECT_EQ(load_error(path), path + ": tensor blk.0.attn_q.bias is not used by architecture llama (no block of this "
                                     "layer takes it); the file does not match its general.architecture");
}

// block_count sizes the layer table and the KV cache: checked against the
// tensors present before anything is sized by it (no GB allocation, no bad_alloc).
TEST(ModelLoad, BlockCountMustMatchTheTensors) {
  for (uint32_t n : {2u, 1000000u, 4294967295u}) {
    TinySpec s;
    s.block_count = n;
    const std::string path = write_tiny(s, "blocks");
    EXPECT_EQ(load_error(path), path + ": invalid metadata llama.block_count: " + std::to_string(n) +
                                    " but the file has tensors for 1 layers (highest blk.0)");
  }
  TinySpec gap;  // two layers claimed, blk.0 and blk.5 present
  gap.block_count = 2;
  gap.extra_tensors.push_back({"blk.5.attn_norm.weight", {256}});
  const std::string path = write_tiny(gap, "gap");
  EXPECT_EQ(load_error(path), path + ": invalid metadata llama.block_count: 2 but the file has tensors for 2 layers "
                                     "(highest blk.5)");
}

TEST(ModelLoad, ExpertCountMustMatchTheTensors) {
  TinySpec s;
  s.extra_metadata.emplace_back("expert_count", gguf::Value::from_u32(4294967295u));
  s.extra_metadata.emplace_back("expert_used_count", gguf::Value::from_u32(2));
  const std::string path = write_tiny(s, "experts");
  EXPECT_EQ(load_error(path),
            path + ": invalid metadata llama.expert_count: 4294967295 but the file has no expert tensors");
}

// Found by model_load_fuzz: a huge key_length sized the RoPE tables (GiBs)
// before any tensor was bound. Bounded with a message naming the key.
TEST(ModelLoad, HugeHeadDimensionIsAnErrorNotAnAllocation) {
  TinySpec s;
  s.extra_metadata.emplace_back("attention.key_length", gguf::Value::from_u32(805306372));
  const std::string path = write_tiny(s, "headdim");
  EXPECT_EQ(load_error(path), path + ": invalid metadata llama.attention.key_length: head dimension 805306372 must "
                                     "be even and in 2..65536");
}

TEST(ModelLoad, NonFiniteFloatsAreRejected) {
  for (const char* key : {"rope.freq_base", "attention.layer_norm_rms_epsilon"}) {
    TinySpec s;
    s.extra_metadata.emplace_back(key, gguf::Value::from_f32(INFINITY));
    const std::string path = write_tiny(s, "inf");
    EXPECT_EQ(load_error(path), path + ": invalid metadata llama." + key + ": must be a finite number (got inf)");
  }
}

// -c sizes the KV cache: refused with the bytes and the flag before allocating.
TEST(ModelLoad, KvCacheAboveAvailableMemoryNamesTheFlag) {
  const std::string path = write_tiny(TinySpec{}, "kv");
  auto cfg = golden_config();
  cfg.n_ctx = 1000000000;
  cfg.memory_bytes = uint64_t{1} << 30;
  EXPECT_EQ(load_error(path, cfg),
            "-c 1000000000: the model state would need 976562.5 MiB (KV rows: 1 layers x 1000000000 positions, 256 "
            "f32 values per position), more than the 1024 MiB of memory available; lower -c");
}

// What stays resident (anon dense buffers, state, a fixed cache) is
// checked against the memory available before the dense weights are read:
// above it the load is refused with the parts and the flags, not OOM-killed.
TEST(ModelLoad, ResidentSetAboveAvailableMemoryIsRefusedBeforeLoading) {
  const std::string path = write_tiny(TinySpec{}, "resident");
  auto cfg = golden_config();
  cfg.n_ctx = 64;
  cfg.memory_bytes = uint64_t{1} << 20;
  EXPECT_EQ(load_error(path, cfg),
            path + ": needs at least 1.6 MiB of memory that must stay resident (dense weights 1.5 MiB with "
                   "--dense-weights anon, model state 0.1 MiB) but 1 MiB are available (MemAvailable, or the "
                   "cgroup's limit where lower); free memory, or use --dense-weights mmap (dense pages are then "
                   "re-read from the file when evicted: slow)");
  cfg.cache_bytes = uint64_t{8} << 20;
  cfg.dense_mode = moe::DenseMode::Mmap;  // page cache: not counted
  EXPECT_EQ(load_error(path, cfg),
            path + ": needs at least 8.1 MiB of memory that must stay resident (model state 0.1 MiB, --cache-mb "
                   "8 MiB) but 1 MiB are available (MemAvailable, or the cgroup's limit where lower); free memory, "
                   "lower --cache-mb");
  cfg.cache_bytes = 0;
  EXPECT_NO_THROW(load(path, cfg));  // mapped dense weights fit
  cfg.dense_mode = moe::DenseMode::Anon;
  EXPECT_THROW(load(path, cfg), Error);  // their 1.5 MiB in anon buffers do not
}

TEST(ModelLoad, UnsupportedTensorType) {
  TinySpec s;
  s.attn_q_type = GgmlType::IQ2_XXS;
  EXPECT_EQ(load_error(write_tiny(s, "type")), "unsupported tensor type IQ2_XXS in tensor blk.0.attn_q.weight");
}

TEST(ModelLoad, WrongShapeAndMissingKeyAreNamed) {
  TinySpec s;
  s.attn_k_rows = 64;
  EXPECT_EQ(load_error(write_tiny(s, "shape")), "tensor blk.0.attn_k.weight has shape {256, 64}, expected {256, 128}");
  TinySpec k;
  k.head_count = false;
  EXPECT_NE(load_error(write_tiny(k, "key")).find("missing metadata key llama.attention.head_count"),
            std::string::npos);
}

TEST(ModelLoad, ContextOverflowIsAnError) {
  auto cfg = golden_config();
  cfg.n_ctx = 2;
  auto m = load(write_tiny({}, "ctx"), cfg);
  std::vector<float> logits(3 * 8);
  const std::vector<int32_t> toks = {1, 2, 3};
  EXPECT_THROW(m->eval(toks, 0, logits.data()), Error);
  EXPECT_EQ(m->n_past(), 0);
}

TEST(RuntimeSession, ContinuedGenerationEqualsOneLongRun) {
  const std::string path = shared_path("models/stories-moe-8x-q8_0.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  auto cfg = golden_config();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  auto collect = [](std::vector<int32_t>& out) { return [&out](int32_t id) { out.push_back(id); return true; }; };
  runtime::Sampler greedy_sampler({});
  auto a = runtime::Session::open(path, cfg);
  std::vector<int32_t> one;
  a.generate(prompt, 20, greedy_sampler, collect(one));
  auto b = runtime::Session::open(path, cfg);
  std::vector<int32_t> two;
  b.generate(prompt, 8, greedy_sampler, collect(two));
  b.generate({}, 12, greedy_sampler, collect(two));
  EXPECT_EQ(one, two);
  EXPECT_EQ(one.front(), 432);  // README reference
}

TEST(CliLogits, WritesExactlyTheLibraryLogits) {
  const std::string json_path = shared_path("golden/llama-moe-q8_0.json");
  if (!exists(json_path)) GTEST_SKIP() << json_path << " not found";
  std::ifstream jf(json_path);
  const auto tokens = nlohmann::json::parse(jf)["tokens"].get<std::vector<int32_t>>();
  std::string list;
  for (int32_t t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  const std::string out = process_temp_path("cli_logits.f32");
  const std::string model = shared_path("golden/llama-moe-q8_0.gguf");
  const std::string cmd = std::string(SLUICE_BINARY) + " logits -m " + model + " --tokens " + list + " -o " + out +
                          " --kv-type f32 -t 3 --no-odirect 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto got = read_f32_file(out);
  auto m = load(model, golden_config());
  const auto want = eval_all(*m, tokens);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  const std::string bad = std::string(SLUICE_BINARY) + " logits -m " + model + " --tokens 1,999 -o " + out +
                          " 2>/dev/null";
  EXPECT_NE(std::system(bad.c_str()), 0);
}

}  // namespace
}  // namespace sluice::test
