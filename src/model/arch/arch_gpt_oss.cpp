// gpt-oss (llama.cpp's src/models/openai-moe.cpp, arch name "gpt-oss").
// Pre-norm: x += Attn(RMSNorm_attn_norm(x)); x += MoE(RMSNorm_post_attention_norm(x)).
// Attention: q/k/v/o biases, NEOX RoPE with YaRN (rope.scaling.*, ggml's
// ext_factor 1, beta_fast 32, beta_slow 1), a learned sink logit per head, and
// a sliding window on every even layer (0, 2, ...; llama.cpp's period 2: there
// is no pattern key), full attention on odd ones.
// Router: logits + bias, top-k of the raw logits, softmax over the k selected.
// Experts: MXFP4 in the published files, with per-expert biases (resident) and
// the clamped SwiGLU (alpha 1.702, limit 7).
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_gpt_oss(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Neox;
  if (!d.hp.is_moe()) r.bad("expert_count", "gpt-oss needs experts");
  const uint32_t window = r.u32("attention.sliding_window");
  if (window == 0) r.bad("attention.sliding_window", "must be > 0");
  for (uint32_t il = 0; il < d.hp.n_layer; ++il) {
    LayerDesc l;
    l.attn.q_bias = l.attn.k_bias = l.attn.v_bias = l.attn.o_bias = Need::Required;
    l.attn.sinks = Need::Required;
    l.attn.window = il % 2 == 0 ? window : 0;
    l.ffn_norm = "post_attention_norm";
    l.ffn.kind = FfnKind::Moe;
    l.ffn.act = Activation::SwiGluOai;
    l.ffn.expert_biases = Need::Required;
    l.ffn.router.kind = RouterKind::SoftmaxSelected;
    l.ffn.router.normalize = false;  // the softmax over the selected already sums to 1
    l.ffn.router.logit_bias = Need::Required;
    d.layers.push_back(l);
  }
  d.tied_output = false;
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// gpt-oss: llama.cpp's LLM_ARCH_OPENAI_MOE names, keys and order as
// in the converter's MXFP4 output (checked against shared/golden/gpt-oss-mxfp4
// .gguf): output / output_norm / token_embd first, then each block's tensors
// alphabetically. Attention has q/k/v/output biases and a per-head sink logit
// (attn_sinks {n_head}); the router has a bias; every expert matrix has a
// per-expert bias {n_out, n_expert} (F32, dense: not streamed with the
// experts); post_attention_norm is the pre-FFN RMSNorm. Sliding-window
// attention on alternate layers (sliding_window) and YaRN RoPE.
//
// Numerics for a forward pass: projections N(0, 1/fan_in) keep activations
// O(1), far below the SwiGLU clamp at 7; biases and sinks are 0.1 N(0,1).
void plan_gpt_oss(const ArchSizes& cfg, PlanBuilder& p) {
  reject_nextn(cfg);
  if (cfg.n_expert == 0) fail("--experts", "gpt-oss needs at least one expert");
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(cfg.n_layer));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  // The converter writes the expert width here too (gpt-oss has no dense FFN).
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(cfg.n_head_kv));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.sliding_window", gguf::Value::from_u32(cfg.n_swa));
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".rope.scaling.type", gguf::Value::from_string("yarn"));
  p.md(a + ".rope.scaling.factor", gguf::Value::from_f32(cfg.rope_scaling_factor));
  p.md(a + ".rope.scaling.original_context_length", gguf::Value::from_u32(cfg.rope_orig_ctx));
  p.file_type(cfg);
  // The built-in vocabulary is split as gpt-oss's o200k tokenizer does.
  const uint64_t V = p.tokenizer("gpt-4o");

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp;
  const uint64_t Q = uint64_t{cfg.n_head} * cfg.head_dim, KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  const GgmlType f32 = GgmlType::F32;
  p.add("output.weight", cfg.output_type, {E, V}, Init::Projection, 0, "--dense-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("token_embd.weight", cfg.embd_type, {E, V}, Init::Embedding, 0, "--embd-type");
  for (uint32_t l = 0; l < cfg.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.add(b + "attn_k.bias", f32, {KV}, Init::Bias, l, "--head-dim");
    p.add(b + "attn_k.weight", cfg.attn_type, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_output.bias", f32, {E}, Init::Bias, l, "--n-embd");
    p.add(b + "attn_output.weight", cfg.attn_type, {Q, E}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q.bias", f32, {Q}, Init::Bias, l, "--head-dim");
    p.add(b + "attn_q.weight", cfg.attn_type, {E, Q}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_sinks.weight", f32, {cfg.n_head}, Init::Bias, l, "--heads");
    p.add(b + "attn_v.bias", f32, {KV}, Init::Bias, l, "--head-dim");
    p.add(b + "attn_v.weight", cfg.attn_v_type, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_down_exps.bias", f32, {E, X}, Init::Bias, l, "--n-embd");
    p.add(b + "ffn_down_exps.weight", cfg.down_type, {F, E, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_gate_exps.bias", f32, {F, X}, Init::Bias, l, "--n-ff-exp");
    p.add(b + "ffn_gate_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_gate_inp.bias", f32, {X}, Init::Bias, l, "--experts");
    p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    p.add(b + "ffn_up_exps.bias", f32, {F, X}, Init::Bias, l, "--n-ff-exp");
    p.add(b + "ffn_up_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "post_attention_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
  }
}

void tiny_gpt_oss(ArchSizes& c) {
  c.n_ff = c.n_ff_exp;
  c.n_swa = 8;
  c.context_length = 131072;
  c.rope_theta = 150000.0f;
  c.rms_eps = 1e-5f;
  c.expert_type = c.down_type = GgmlType::MXFP4;
}

}  // namespace

extern const ArchSynth synth_gpt_oss = {plan_gpt_oss, tiny_gpt_oss};

}  // namespace sluice::model
