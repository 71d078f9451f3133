// llama (llama.cpp's src/models/llama.cpp): pre-norm decoder, RoPE NORM
// (adjacent pairs) on q/k as stored, no q/k norm, no biases. Dense SwiGLU FFN,
// or Mixtral-style routed experts when llama.expert_count > 0 (softmax over
// all experts, top-k, renormalised: equal to Mixtral's softmax over the top-k
// logits).
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_llama(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Norm;
  if (!d.hp.is_moe() && d.hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for a dense model");
  LayerDesc l;
  if (d.hp.is_moe()) {
    l.ffn.kind = FfnKind::Moe;
    l.ffn.router.kind = RouterKind::SoftmaxAll;
    l.ffn.router.normalize = true;
  } else {
    l.ffn.kind = FfnKind::Dense;
    l.ffn.n_ff = d.hp.n_ff;
  }
  d.layers.assign(d.hp.n_layer, l);
  d.ignored = {"rope_freqs.weight"};  // llama-3 long-context factors: not applied (no llama3 rope scaling yet)
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// llama: dense (n_expert 0) or Mixtral-style MoE, with llama.cpp's
// LLM_ARCH_LLAMA names and keys: llama.expert_count/expert_used_count only for
// MoE, feed_forward_length = the FFN width (the expert width for MoE, as
// Mixtral's converter writes it), rope.dimension_count = head_dim (RoPE type
// NORM), llama.vocab_size; key/value_length only where head_dim differs from
// n_embd / n_head (the converter writes them only then).
void plan_llama(const ArchSizes& cfg, PlanBuilder& p) {
  reject_nextn(cfg);
  const bool moe = cfg.n_expert > 0;
  const uint32_t ff = moe ? cfg.n_ff_exp : cfg.n_ff;
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(cfg.n_layer));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(cfg.n_head_kv));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  if (moe) {
    p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
    p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  }
  if (uint64_t{cfg.head_dim} * cfg.n_head != cfg.n_embd) {
    p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
    p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  }
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(cfg.head_dim));
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();
  p.md(a + ".vocab_size", gguf::Value::from_u32(static_cast<uint32_t>(V)));

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = ff;
  const uint64_t Q = uint64_t{cfg.n_head} * cfg.head_dim, KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  const GgmlType f32 = GgmlType::F32;
  p.add("token_embd.weight", cfg.embd_type, {E, V}, Init::Embedding, 0, "--embd-type");
  for (uint32_t l = 0; l < cfg.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    // Alphabetical within a block, as llama-quantize's outputs list them.
    p.add(b + "attn_k.weight", cfg.attn_type, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_output.weight", cfg.attn_type, {Q, E}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q.weight", cfg.attn_type, {E, Q}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_v.weight", cfg.attn_v_type, {E, KV}, Init::Projection, l, "--dense-type");
    if (moe) {
      p.add(b + "ffn_down_exps.weight", cfg.down_type, {F, E, X}, Init::Projection, l, "--type");
      p.add(b + "ffn_gate_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
      p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    } else {
      // Dense FFN matrices take the dense type (they are resident, like attention).
      p.add(b + "ffn_down.weight", cfg.attn_type, {F, E}, Init::Projection, l, "--dense-type");
      p.add(b + "ffn_gate.weight", cfg.attn_type, {E, F}, Init::Projection, l, "--dense-type");
    }
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    if (moe)
      p.add(b + "ffn_up_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    else
      p.add(b + "ffn_up.weight", cfg.attn_type, {E, F}, Init::Projection, l, "--dense-type");
  }
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", cfg.output_type, {E, V}, Init::Projection, 0, "--dense-type");
}

// Mixtral-like MoE; --experts 0 makes it dense (FFN n_ff).
void tiny_llama(ArchSizes& c) {
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.rms_eps = 1e-5f;
}

}  // namespace

extern const ArchSynth synth_llama = {plan_llama, tiny_llama};

}  // namespace sluice::model
