// Writes the generated fuzzing seeds, tiny valid files (< 10 KB each), under
// DIR (normally fuzz/corpus): DIR/gguf (parser), DIR/model_load (a 1-layer
// llama and a 1-layer qwen3moe with small nonzero weights) and
// DIR/tokenizer (mode byte 3 + a tiny GGUF vocab). Usage: `gguf_fuzz_seeds
// DIR`; the subfolders must exist. (Named .bin because the repository
// ignores *.gguf.) The other seeds (tokenizer text, route traces) are
// hand-written files in the repository.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "util/error.h"

using namespace sluice;
using namespace sluice::gguf;

namespace {

void write_tensors(Writer& w, const std::vector<uint64_t>& sizes) {
  w.write_header();
  for (uint64_t n : sizes) {
    std::vector<uint8_t> bytes(n, 0x5a);
    w.write_tensor_data(bytes.data(), bytes.size());
  }
  w.finish();
}

// Writes a model whose tensors are F32 with small deterministic values.
struct TensorSpec {
  std::string name;
  std::vector<uint64_t> ne;
};

void write_model(const std::string& path, const std::string& arch, const std::vector<std::pair<std::string, uint32_t>>& kv,
                 const std::vector<TensorSpec>& ts) {
  Writer w(path);
  w.add_metadata("general.architecture", Value::from_string(arch));
  for (const auto& [k, v] : kv) w.add_metadata(arch + "." + k, Value::from_u32(v));
  for (const auto& t : ts) w.add_tensor(t.name, GgmlType::F32, t.ne);
  w.write_header();
  uint32_t state = 1;
  for (const auto& t : ts) {
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    std::vector<float> v(n);
    for (float& x : v) {
      state = state * 1664525u + 1013904223u;
      x = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.2f;
    }
    w.write_tensor_data(v.data(), v.size() * sizeof(float));
  }
  w.finish();
}

std::vector<TensorSpec> attention(uint64_t n_embd, uint64_t head_dim, uint64_t n_head, uint64_t n_kv, bool qk_norm) {
  std::vector<TensorSpec> t = {{"blk.0.attn_norm.weight", {n_embd}},
                               {"blk.0.ffn_norm.weight", {n_embd}},
                               {"blk.0.attn_q.weight", {n_embd, head_dim * n_head}},
                               {"blk.0.attn_k.weight", {n_embd, head_dim * n_kv}},
                               {"blk.0.attn_v.weight", {n_embd, head_dim * n_kv}},
                               {"blk.0.attn_output.weight", {head_dim * n_head, n_embd}}};
  if (qk_norm) {
    t.push_back({"blk.0.attn_q_norm.weight", {head_dim}});
    t.push_back({"blk.0.attn_k_norm.weight", {head_dim}});
  }
  return t;
}

// Prepends one byte to a file (the tokenizer target's mode byte).
void prepend_byte(const std::string& path, char b) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::ofstream(path, std::ios::binary) << b << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    {  // metadata only, every scalar type and nested arrays
      Writer w(dir + "/gguf/seed-values.bin");
      Value u8; u8.type = ValueType::UINT8; u8.u = 7;
      Value i64; i64.type = ValueType::INT64; i64.i = -5;
      Value f64; f64.type = ValueType::FLOAT64; f64.f = 0.25;
      Value nested; nested.type = ValueType::ARRAY; nested.elem_type = ValueType::ARRAY;
      nested.array = {Value::from_i32s({1, 2}), Value::from_i32s({3})};
      w.add_metadata("general.architecture", Value::from_string("llama"));
      w.add_metadata("u8", u8);
      w.add_metadata("i64", i64);
      w.add_metadata("f64", f64);
      w.add_metadata("b", Value::from_bool(true));
      w.add_metadata("u64", Value::from_u64(123));
      w.add_metadata("f32", Value::from_f32(1.5f));
      w.add_metadata("tokens", Value::from_strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81the"}));
      w.add_metadata("scores", Value::from_f32s({0, -1, -2, -3}));
      w.add_metadata("nested", nested);
      write_tensors(w, {});
    }
    {  // quantized tensors and a 3-D expert tensor
      Writer w(dir + "/gguf/seed-tensors.bin");
      w.add_metadata("general.architecture", Value::from_string("qwen3moe"));
      w.add_tensor("token_embd.weight", GgmlType::Q8_0, {32, 4});
      w.add_tensor("blk.0.ffn_gate_exps.weight", GgmlType::F16, {8, 4, 4});
      w.add_tensor("blk.0.ffn_down_exps.weight", GgmlType::Q4_K, {256, 1, 2});
      w.add_tensor("output_norm.weight", GgmlType::F32, {8});
      write_tensors(w, {136, 256, 288, 32});
    }
    {  // non-default alignment
      Writer w(dir + "/gguf/seed-aligned.bin", 128);
      w.add_metadata("split.count", Value::from_u32(1));
      w.add_tensor("a", GgmlType::BF16, {16});
      w.add_tensor("b", GgmlType::MXFP4, {64, 2});
      write_tensors(w, {32, 68});
    }
    {  // 1-layer dense llama: n_embd 8, 2 heads of 4, 1 KV head, FFN 8, vocab 6
      std::vector<TensorSpec> t = {{"token_embd.weight", {8, 6}}, {"output_norm.weight", {8}}};
      for (auto& a : attention(8, 4, 2, 1, false)) t.push_back(a);
      t.push_back({"blk.0.ffn_gate.weight", {8, 8}});
      t.push_back({"blk.0.ffn_up.weight", {8, 8}});
      t.push_back({"blk.0.ffn_down.weight", {8, 8}});
      write_model(dir + "/model_load/seed-llama.bin", "llama",
                  {{"block_count", 1}, {"embedding_length", 8}, {"attention.head_count", 2},
                   {"attention.head_count_kv", 1}, {"feed_forward_length", 8}, {"context_length", 16}},
                  t);
    }
    {  // 1-layer qwen3moe: 3 experts of FFN 4, top-2, qk-norm, untied output
      std::vector<TensorSpec> t = {{"token_embd.weight", {8, 6}}, {"output_norm.weight", {8}},
                                   {"output.weight", {8, 6}}};
      for (auto& a : attention(8, 4, 2, 1, true)) t.push_back(a);
      t.push_back({"blk.0.ffn_gate_inp.weight", {8, 3}});
      t.push_back({"blk.0.ffn_gate_exps.weight", {8, 4, 3}});
      t.push_back({"blk.0.ffn_up_exps.weight", {8, 4, 3}});
      t.push_back({"blk.0.ffn_down_exps.weight", {4, 8, 3}});
      write_model(dir + "/model_load/seed-qwen3moe.bin", "qwen3moe",
                  {{"block_count", 1}, {"embedding_length", 8}, {"attention.head_count", 2},
                   {"attention.head_count_kv", 1}, {"attention.key_length", 4}, {"expert_count", 3},
                   {"expert_used_count", 2}, {"expert_feed_forward_length", 4}, {"context_length", 16}},
                  t);
    }
    {  // tiny vocabularies (SPM with byte fallback; byte-level BPE with merges)
      const std::string spm = dir + "/tokenizer/seed-vocab-spm.bin";
      {
        Writer w(spm);
        w.add_metadata("tokenizer.ggml.model", Value::from_string("llama"));
        w.add_metadata("tokenizer.ggml.tokens", Value::from_strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81",
                                                                     "\xE2\x96\x81the", "<0x41>", "a", "b"}));
        w.add_metadata("tokenizer.ggml.scores", Value::from_f32s({0, 0, 0, -1, -2, 0, -3, -4}));
        w.add_metadata("tokenizer.ggml.token_type", Value::from_i32s({2, 3, 3, 1, 1, 6, 1, 1}));
        w.add_metadata("tokenizer.ggml.bos_token_id", Value::from_u32(1));
        w.add_metadata("tokenizer.ggml.eos_token_id", Value::from_u32(2));
        write_tensors(w, {});
      }
      prepend_byte(spm, 3);
      const std::string bpe = dir + "/tokenizer/seed-vocab-bpe.bin";
      {
        Writer w(bpe);
        w.add_metadata("tokenizer.ggml.model", Value::from_string("gpt2"));
        w.add_metadata("tokenizer.ggml.pre", Value::from_string("qwen2"));
        w.add_metadata("tokenizer.ggml.tokens", Value::from_strings({"H", "e", "l", "o", "\xC4\xA0", "He", "ll",
                                                                     "<|endoftext|>"}));
        w.add_metadata("tokenizer.ggml.token_type", Value::from_i32s({1, 1, 1, 1, 1, 1, 1, 3}));
        w.add_metadata("tokenizer.ggml.merges", Value::from_strings({"H e", "l l"}));
        w.add_metadata("tokenizer.ggml.eos_token_id", Value::from_u32(7));
        write_tensors(w, {});
      }
      prepend_byte(bpe, 7);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
