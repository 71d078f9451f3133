// qwen2moe (llama.cpp's src/models/qwen2moe.cpp: Qwen1.5-MoE-A2.7B,
// Qwen2-57B-A14B): pre-norm decoder, q/k/v projections with (optional)
// biases, NEOX RoPE over the whole head, no q/k norm; MoE with softmax over
// all experts and top-k WITHOUT renormalising the k weights (norm_w false,
// hard-wired in llama.cpp's graph; no expert weight scale), plus a shared
// SwiGLU expert of expert_shared_feed_forward_length scaled by
// sigmoid(ffn_gate_inp_shexp . x) (ffn_gate_inp_shexp a vector {n_embd}).
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_qwen2moe(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Neox;
  if (!d.hp.is_moe()) r.bad("expert_count", "qwen2moe needs experts");
  // llama.cpp's fallbacks for the two widths (load_arch_tensors).
  if (!r.model().metadata().has(r.key("expert_feed_forward_length"))) {
    d.hp.n_ff_exp = d.hp.n_ff / d.hp.n_expert_used;
    if (d.hp.n_ff_exp == 0)
      r.bad("expert_feed_forward_length", "absent, and feed_forward_length / expert_used_count is 0");
  }
  LayerDesc l;
  l.attn.q_bias = l.attn.k_bias = l.attn.v_bias = Need::Optional;
  l.ffn.kind = FfnKind::Moe;
  l.ffn.router.kind = RouterKind::SoftmaxAll;
  l.ffn.router.normalize = false;
  l.ffn.shared_expert = true;
  l.ffn.shared_gate = true;
  l.ffn.n_ff = r.u32("expert_shared_feed_forward_length", d.hp.n_ff);
  if (l.ffn.n_ff == 0)
    r.bad("expert_shared_feed_forward_length", "must be > 0 (or feed_forward_length as its fallback)");
  d.layers.assign(d.hp.n_layer, l);
  d.tied_output = false;
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// Keys and tensors as llama.cpp's converter writes LLM_ARCH_QWEN2MOE
// (Qwen2MoeModel): q/k/v with biases; attn_output {q_dim, n_embd} where
// llama.cpp requires q_dim == n_embd (checked); per block ffn_norm, the router,
// stacked experts, ffn_gate_inp_shexp {n_embd} and the shared expert of
// n_ff_shexp (default: n_ff_exp). Routers, norms, biases and the shared gate
// stay F32 (llama-quantize quantizes none of them).
void plan_qwen2moe(const ArchSizes& cfg, PlanBuilder& p) {
  reject_nextn(cfg);
  if (cfg.n_expert == 0) fail("--experts", "qwen2moe needs at least one expert");
  if (uint64_t{cfg.n_head} * cfg.head_dim != cfg.n_embd)
    fail("--head-dim", "qwen2moe needs heads x head dim = n_embd (llama.cpp's attn_output is {n_embd, n_embd}); " +
                           std::to_string(cfg.n_head) + " x " + std::to_string(cfg.head_dim) + " != " +
                           std::to_string(cfg.n_embd));
  const uint64_t FS = cfg.n_ff_shexp ? cfg.n_ff_shexp : cfg.n_ff_exp;
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(cfg.n_layer));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(cfg.n_head_kv));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".expert_shared_feed_forward_length", gguf::Value::from_u32(static_cast<uint32_t>(FS)));
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp;
  const uint64_t KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  const GgmlType f32 = GgmlType::F32;
  auto dense = [&](uint64_t row) { return quantize_fallback(cfg.attn_type, row); };
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  for (uint32_t l = 0; l < cfg.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    // llama-quantize's Q4_K_M types: ffn_down* and attn_v (one per block) by block.
    auto down = [&](GgmlType t, uint64_t row) { return more_bits_type(cfg, t, l, cfg.n_layer, row); };
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_q.weight", dense(E), {E, E}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q.bias", f32, {E}, Init::Bias, l, "--n-embd");
    p.add(b + "attn_k.weight", dense(E), {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_k.bias", f32, {KV}, Init::Bias, l, "--kv-heads");
    p.add(b + "attn_v.weight", down(cfg.attn_v_type, E), {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_v.bias", f32, {KV}, Init::Bias, l, "--kv-heads");
    p.add(b + "attn_output.weight", dense(E), {E, E}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    p.add(b + "ffn_gate_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_up_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_down_exps.weight", down(cfg.down_type, F), {F, E, X}, Init::Projection, l,
          "--n-ff-exp");
    p.add(b + "ffn_gate_inp_shexp.weight", f32, {E}, Init::Projection, l, "--n-embd");
    p.add(b + "ffn_gate_shexp.weight", dense(E), {E, FS}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_up_shexp.weight", dense(E), {E, FS}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_down_shexp.weight", down(cfg.attn_type, FS), {FS, E}, Init::Projection, l, "--n-ff-exp");
  }
  p.sort_as_quantized();
}

// A small Qwen1.5-MoE: 8 experts top-4 (the real model routes 60 top-4) and a
// shared expert twice the expert width.
void tiny_qwen2moe(ArchSizes& c) {
  c.n_expert = 8;
  c.n_expert_used = 4;
  c.n_ff_exp = 64;
  c.n_ff_shexp = 128;
  c.n_ff = 256;
  c.context_length = 8192;
  c.n_layer = 3;
}

}  // namespace

extern const ArchSynth synth_qwen2moe = {plan_qwen2moe, tiny_qwen2moe};

}  // namespace sluice::model
