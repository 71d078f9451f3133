// qwen3moe (llama.cpp's src/models/qwen3moe.cpp): per-head RMSNorm of q and k
// before NEOX RoPE, routed experts with softmax gating and renormalised top-k
// weights (Qwen3's norm_topk_prob, hard-wired: there is no GGUF key), no
// shared expert.
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

ArchDesc describe_qwen3moe(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Neox;
  if (!d.hp.is_moe()) r.bad("expert_count", "qwen3moe needs experts");
  LayerDesc l;
  l.attn.q_norm = Need::Required;
  l.attn.k_norm = Need::Required;
  l.ffn.kind = FfnKind::Moe;
  l.ffn.router.kind = RouterKind::SoftmaxAll;
  l.ffn.router.normalize = true;
  d.layers.assign(d.hp.n_layer, l);
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// qwen3moe: the tensor/metadata plan with exactly llama.cpp's names
// (LLM_ARCH_QWEN3MOE tensor map) and shapes in ggml order ({row length,
// rows[, experts]}).
void plan_qwen3moe(const ArchSizes& cfg, PlanBuilder& p) {
  reject_nextn(cfg);
  if (cfg.n_expert == 0) fail("--experts", "qwen3moe needs at least one expert");
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
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp;
  const uint64_t Q = uint64_t{cfg.n_head} * cfg.head_dim, KV = uint64_t{cfg.n_head_kv} * cfg.head_dim;
  const GgmlType f32 = GgmlType::F32;
  p.add("token_embd.weight", cfg.embd_type, {E, V}, Init::Embedding, 0, "--embd-type");
  for (uint32_t l = 0; l < cfg.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    // Alphabetical within a block, as llama.cpp's converter emits them.
    p.add(b + "attn_k.weight", cfg.attn_type, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_k_norm.weight", f32, {cfg.head_dim}, Init::Norm, l, "--head-dim");
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_output.weight", cfg.attn_type, {Q, E}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q.weight", cfg.attn_type, {E, Q}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q_norm.weight", f32, {cfg.head_dim}, Init::Norm, l, "--head-dim");
    p.add(b + "attn_v.weight", cfg.attn_v_type, {E, KV}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_down_exps.weight", cfg.down_type, {F, E, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_gate_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_up_exps.weight", cfg.expert_type, {E, F, X}, Init::Projection, l, "--type");
  }
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", cfg.output_type, {E, V}, Init::Projection, 0, "--dense-type");
}

void tiny_qwen3moe(ArchSizes&) {}  // the ArchSizes defaults are the tiny qwen3moe model

}  // namespace

extern const ArchSynth synth_qwen3moe = {plan_qwen3moe, tiny_qwen3moe};

}  // namespace sluice::model
