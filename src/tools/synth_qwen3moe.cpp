// qwen3moe for synth: presets, validation, and the tensor/metadata plan with
// exactly llama.cpp's names (LLM_ARCH_QWEN3MOE tensor map) and shapes in ggml
// order ({row length, rows[, experts]}).
#include <string>

#include "tools/synth_plan.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// llama.cpp's general.file_type (llama_ftype) that best describes the mix,
// keyed by the expert type since experts hold almost all the bytes.
uint32_t file_type_for(GgmlType expert_type) {
  switch (expert_type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q4_K: return 15;  // MOSTLY_Q4_K_M
    case GgmlType::Q6_K: return 18;
    case GgmlType::BF16: return 32;
    case GgmlType::MXFP4: return 38;  // MOSTLY_MXFP4_MOE
    default: return 0;
  }
}

void require_positive(uint32_t v, const char* flag) {
  if (v == 0) fail(flag, "must be positive");
}

}  // namespace

std::vector<std::string> synth_preset_names() { return {"tiny", "qwen3-30b-a3b"}; }

SynthConfig synth_preset(const std::string& preset) {
  SynthConfig c;
  if (preset == "tiny") {
    c.name = "sluice-synth-tiny";
    return c;  // the defaults are the tiny model
  }
  if (preset == "qwen3-30b-a3b") {
    c.name = "sluice-synth-qwen3-30b-a3b";
    c.n_layer = 48;
    c.n_expert = 128;
    c.n_expert_used = 8;
    c.n_embd = 2048;
    c.n_ff_exp = 768;
    c.n_ff = 6144;
    c.n_head = 32;
    c.n_head_kv = 4;
    c.head_dim = 128;
    c.n_vocab = 151936;
    c.context_length = 40960;
    c.rope_theta = 1e6f;
    c.rms_eps = 1e-6f;
    // Q4_K_M-like: Q4_K experts and q/k/o, Q6_K v and lm head, Q6_K embeddings.
    c.expert_type = GgmlType::Q4_K;
    c.down_type = GgmlType::Q4_K;
    c.attn_type = GgmlType::Q4_K;
    c.attn_v_type = GgmlType::Q6_K;
    c.embd_type = GgmlType::Q6_K;
    c.output_type = GgmlType::Q6_K;
    return c;
  }
  std::string names;
  for (const auto& n : synth_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("--preset", "unknown preset '" + preset + "' (available: " + names + ")");
}

SynthPlan plan_qwen3moe(const SynthConfig& cfg) {
  require_positive(cfg.n_layer, "--layers");
  require_positive(cfg.n_expert, "--experts");
  require_positive(cfg.n_expert_used, "--experts-used");
  require_positive(cfg.n_embd, "--n-embd");
  require_positive(cfg.n_ff_exp, "--n-ff-exp");
  require_positive(cfg.n_head, "--heads");
  require_positive(cfg.n_head_kv, "--kv-heads");
  require_positive(cfg.head_dim, "--head-dim");
  if (cfg.n_expert_used > cfg.n_expert)
    fail("--experts-used", std::to_string(cfg.n_expert_used) + " exceeds --experts " + std::to_string(cfg.n_expert));
  if (cfg.n_head % cfg.n_head_kv != 0)
    fail("--kv-heads", std::to_string(cfg.n_head_kv) + " does not divide --heads " + std::to_string(cfg.n_head));

  SynthPlan p;
  uint32_t n_vocab = 0;
  auto tokenizer = synth_vocab(cfg.vocab_path, cfg.n_vocab, &n_vocab);

  const std::string a = cfg.arch;
  auto md = [&](std::string key, gguf::Value v) { p.metadata.emplace_back(std::move(key), std::move(v)); };
  md("general.architecture", gguf::Value::from_string(a));
  md("general.type", gguf::Value::from_string("model"));
  md("general.name", gguf::Value::from_string(cfg.name));
  md(a + ".block_count", gguf::Value::from_u32(cfg.n_layer));
  md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  md(a + ".attention.head_count_kv", gguf::Value::from_u32(cfg.n_head_kv));
  md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  md("general.file_type", gguf::Value::from_u32(file_type_for(cfg.expert_type)));
  md("general.quantization_version", gguf::Value::from_u32(2));
  for (auto& kv : tokenizer) p.metadata.push_back(std::move(kv));

  const uint64_t E = cfg.n_embd, V = n_vocab, X = cfg.n_expert, F = cfg.n_ff_exp;
  const uint64_t Q = uint64_t{cfg.n_head} * cfg.head_dim, KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  auto add = [&](std::string name, GgmlType type, std::vector<uint64_t> ne, Init init, uint32_t layer,
                 const char* flag) {
    if (!ggml_row_bytes(type, ne[0]))
      fail(flag, std::string(ggml_type_name(type)) + " needs rows that are a multiple of " +
                     std::to_string(ggml_type_info(type).block_elems) + " values, but " + name + " has rows of " +
                     std::to_string(ne[0]));
    p.tensors.push_back({std::move(name), type, std::move(ne), init, layer, false});
  };
  const GgmlType f32 = GgmlType::F32;
  add("token_embd.weight", cfg.embd_type, {E, V}, Init::Embedding, 0, "--embd-type");
  for (uint32_t l = 0; l < cfg.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    // Alphabetical within a block, as llama.cpp's converter emits them.
    add(b + "attn_k.weight", cfg.attn_type, {E, KV}, Init::Projection, l, "--dense-type");
    add(b + "attn_k_norm.weight", f32, {cfg.head_dim}, Init::Norm, l, "--head-dim");
    add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    add(b + "attn_output.weight", cfg.attn_type, {Q, E}, Init::Projection, l, "--dense-type");
    add(b + "attn_q.weight", cfg.attn_type, {E, Q}, Init::Projection, l, "--dense-type");
    add(b + "attn_q_norm.weight", f32, {cfg.head_dim}, Init::Norm, l, "--head-dim");
    add(b + "attn_v.weight", cfg.attn_v_type, {E, KV}, Init::Projection, l, "--dense-type");
    add(b + "ffn_down_exps.weight", cfg.down_type, {F, E, X}, Init::Projection, l, "--type");
    add(b + "ffn_gate_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    add(b + "ffn_up_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
  }
  add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  add("output.weight", cfg.output_type, {E, V}, Init::Projection, 0, "--dense-type");
  return p;
}

}  // namespace sluice::tools
