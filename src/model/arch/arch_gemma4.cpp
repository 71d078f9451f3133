// gemma4 (llama.cpp's src/models/gemma4.cpp): Gemma 4 MoE (Gemma-4-26B-A4B).
// Layer il is sliding-window iff attention.sliding_window_pattern[il], else
// full attention; the two kinds have their own head dim (key_length_swa /
// key_length), KV heads (the per-layer attention.head_count_kv array) and
// RoPE (NEOX; SWA: rope.freq_base_swa over rope.dimension_count_swa dims;
// full: rope.freq_base over rope.dimension_count dims with rope_freqs.weight
// as per-pair frequency factors, "proportional" RoPE). Full layers without
// attn_v.weight use the raw k projection as values (K = V); values get an
// unweighted per-head RMSNorm; attention scale 1. The block
// (BlockKind::Gemma4, model/transformer_gemma4.cpp) post-norms its attention,
// runs a dense GELU MLP beside the routed GELU experts (router input scaled by
// ffn_gate_inp.scale, per-expert ffn_down_exps.scale, fused ffn_gate_up_exps
// or separate gate/up) and scales its output by layer_output_scale. Input
// embedding times sqrt(n_embd), tied lm head, final logit softcapping.
#include <cmath>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// attention.sliding_window_pattern: a bool per layer (true = SWA).
std::vector<bool> swa_pattern(const ArchReader& r, uint32_t n_layer) {
  const std::string k = "attention.sliding_window_pattern";
  const gguf::Value* v = r.model().metadata().find(r.key(k));
  if (!v) r.bad(k, "missing (gemma4 needs a bool per layer)");
  if (v->type != gguf::ValueType::ARRAY || v->elem_type != gguf::ValueType::BOOL)
    r.bad(k, "must be an array of bools");
  if (v->array.size() != n_layer)
    r.bad(k, std::to_string(v->array.size()) + " entries for " + std::to_string(n_layer) + " layers");
  std::vector<bool> out;
  for (const gguf::Value& e : v->array) out.push_back(e.u != 0);
  return out;
}

// attention.head_count_kv: one per layer (an array) or one for all.
std::vector<uint32_t> kv_heads(const ArchReader& r, uint32_t n_layer, uint32_t n_head) {
  const std::string k = "attention.head_count_kv";
  std::vector<uint32_t> out(n_layer, n_head);
  if (const gguf::Value* v = r.model().metadata().find(r.key(k)); v && v->type == gguf::ValueType::ARRAY) {
    const auto a = r.model().metadata().get_int_array(r.key(k));
    if (a->size() != n_layer) r.bad(k, std::to_string(a->size()) + " entries for " + std::to_string(n_layer) + " layers");
    for (uint32_t il = 0; il < n_layer; ++il) {
      if ((*a)[il] <= 0 || (*a)[il] > n_head || n_head % (*a)[il] != 0)
        r.bad(k, "layer " + std::to_string(il) + ": " + std::to_string((*a)[il]) + " does not divide head_count " +
                     std::to_string(n_head));
      out[il] = static_cast<uint32_t>((*a)[il]);
    }
  } else {
    out.assign(n_layer, r.u32(k, n_head));
  }
  return out;
}

}  // namespace

ArchDesc describe_gemma4(const ArchReader& r) {
  ArchDesc d;
  HParams& hp = d.hp;
  hp = r.common();
  hp.rope.type = RopeType::Neox;
  if (!hp.is_moe()) r.bad("expert_count", "gemma4 (as sluice runs it) needs experts");
  if (r.u32("attention.shared_kv_layers", 0) != 0) r.bad("attention.shared_kv_layers", "shared-KV layers are not supported");
  if (r.u32("embedding_length_per_layer_input", 0) != 0)
    r.bad("embedding_length_per_layer_input", "per-layer embeddings are not supported");
  if (hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 (the dense MLP beside the experts)");
  if (hp.head_dim_v != hp.head_dim) r.bad("attention.value_length", "must equal attention.key_length");
  constexpr uint32_t kMaxHeadDim = 1u << 16;
  const uint32_t hd_swa = r.u32("attention.key_length_swa");
  if (hd_swa == 0 || hd_swa % 2 != 0 || hd_swa > kMaxHeadDim)
    r.bad("attention.key_length_swa", "head dimension " + std::to_string(hd_swa) + " must be even and in 2.." +
                                          std::to_string(kMaxHeadDim));
  if (r.u32("attention.value_length_swa", hd_swa) != hd_swa)
    r.bad("attention.value_length_swa", "must equal attention.key_length_swa");
  RopeParams rope_swa = hp.rope;
  rope_swa.theta = r.f32("rope.freq_base_swa", 10000.0f);
  if (!(rope_swa.theta > 0)) r.bad("rope.freq_base_swa", "must be > 0");
  rope_swa.n_rot = r.u32("rope.dimension_count_swa", hd_swa);
  if (rope_swa.n_rot == 0 || rope_swa.n_rot > hd_swa || rope_swa.n_rot % 2 != 0)
    r.bad("rope.dimension_count_swa", "must be even and in (0, key_length_swa]");
  const uint32_t window = r.u32("attention.sliding_window");
  if (window == 0) r.bad("attention.sliding_window", "must be > 0");
  hp.logit_softcap = r.f32("final_logit_softcapping", 30.0f);
  if (hp.logit_softcap < 0) r.bad("final_logit_softcapping", "must be >= 0");
  hp.attn_scale = 1.0f;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));

  const std::vector<bool> swa = swa_pattern(r, hp.n_layer);
  const std::vector<uint32_t> kv = kv_heads(r, hp.n_layer, hp.n_head);
  const bool has_rope_freqs = r.model().find("rope_freqs.weight") != nullptr;
  for (uint32_t il = 0; il < hp.n_layer; ++il) {
    LayerDesc l;
    l.block = BlockKind::Gemma4;
    l.attn.q_norm = l.attn.k_norm = Need::Required;
    l.attn.v_norm = true;
    l.attn.n_head_kv = kv[il];
    if (swa[il]) {
      l.attn.window = window;
      l.attn.head_dim = hd_swa;
      l.attn.rope = rope_swa;
    } else {
      l.attn.head_dim = hp.head_dim;
      l.attn.rope = hp.rope;
      l.attn.rope_freqs = has_rope_freqs;
      l.attn.v_from_k = true;  // when attn_v.weight is absent
    }
    l.ffn.kind = FfnKind::Moe;
    l.ffn.act = Activation::GeluTanh;
    l.ffn.n_ff = hp.n_ff;
    l.ffn.router.kind = RouterKind::SoftmaxAll;
    l.ffn.router.normalize = true;
    d.layers.push_back(l);
  }
  d.tied_output = true;
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// Names, keys and shapes as llama.cpp's converter writes LLM_ARCH_GEMMA4
// (checked against shared/golden/gemma4-{f32,kquants,split-q8_0}.gguf):
// token_embd (the tied lm head, no output.weight), rope_freqs {head_dim/2}
// (shared by the full layers), output_norm; per layer attn_norm, attn_q,
// attn_k, attn_v (SWA layers only: full layers use K = V), attn_output,
// attn_q_norm / attn_k_norm {layer head dim}, post_attention_norm,
// layer_output_scale {1}, ffn_norm, the dense ffn_gate/up/down (n_ff),
// post_ffw_norm_1, ffn_gate_inp (+ .scale {n_embd}), pre_ffw_norm_2,
// ffn_gate_up_exps {E, 2 F, X} (or ffn_gate_exps + ffn_up_exps),
// ffn_down_exps (+ .scale {X}), post_ffw_norm_2, post_ffw_norm.
void plan_gemma4(const ArchSizes& cfg, PlanBuilder& p) {
  reject_nextn(cfg);
  if (cfg.n_expert == 0) fail("--experts", "gemma4 needs at least one expert");
  if (cfg.swa_period == 0) fail("swa_period", "must be > 0");
  if (cfg.head_dim_swa == 0 || cfg.head_dim_swa % 2 != 0) fail("head_dim_swa", "must be even and > 0");
  if (cfg.head_dim % 8 != 0) fail("--head-dim", "gemma4's proportional RoPE needs a multiple of 8");
  if (cfg.n_head_kv == 0 || cfg.n_head % cfg.n_head_kv != 0 || cfg.n_head_kv_full == 0 ||
      cfg.n_head % cfg.n_head_kv_full != 0)
    fail("--kv-heads", "KV heads must divide the query heads");
  const std::string a = cfg.arch;
  const uint32_t L = cfg.n_layer;
  auto full = [&](uint32_t l) { return (l + 1) % cfg.swa_period == 0; };
  std::vector<int32_t> kv_heads;
  std::vector<bool> pattern;
  for (uint32_t l = 0; l < L; ++l) {
    kv_heads.push_back(static_cast<int32_t>(full(l) ? cfg.n_head_kv_full : cfg.n_head_kv));
    pattern.push_back(!full(l));
  }
  gguf::Value swa;
  swa.type = gguf::ValueType::ARRAY;
  swa.elem_type = gguf::ValueType::BOOL;
  for (bool b : pattern) swa.array.push_back(gguf::Value::from_bool(b));
  p.general(cfg);
  p.file_type(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(L));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_i32s(kv_heads));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.key_length_swa", gguf::Value::from_u32(cfg.head_dim_swa));
  p.md(a + ".attention.value_length_swa", gguf::Value::from_u32(cfg.head_dim_swa));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".attention.sliding_window", gguf::Value::from_u32(cfg.n_swa));
  p.md(a + ".attention.sliding_window_pattern", swa);
  p.md(a + ".attention.shared_kv_layers", gguf::Value::from_u32(0));
  p.md(a + ".embedding_length_per_layer_input", gguf::Value::from_u32(0));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".rope.freq_base_swa", gguf::Value::from_f32(cfg.rope_theta_swa));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".rope.dimension_count_swa", gguf::Value::from_u32(cfg.head_dim_swa));
  p.md(a + ".final_logit_softcapping", gguf::Value::from_f32(cfg.logit_softcap));
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  const uint64_t V = p.tokenizer();

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp, FD = cfg.n_ff;
  const GgmlType f32 = GgmlType::F32;
  auto dense = [&](uint64_t row) { return quantize_fallback(cfg.attn_type, row); };
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("rope_freqs.weight", f32, {cfg.head_dim / 2}, Init::QuarterRope, 0, "--head-dim");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  // llama-quantize's Q4_K_M counts attn_v among the attn_v tensors: the
  // sliding-window layers' (full layers have K = V, no attn_v).
  uint32_t n_attn_v = 0, i_attn_v = 0;
  for (uint32_t l = 0; l < L; ++l) n_attn_v += full(l) ? 0 : 1;
  for (uint32_t l = 0; l < L; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const uint64_t D = full(l) ? cfg.head_dim : cfg.head_dim_swa;
    const uint64_t Q = uint64_t{cfg.n_head} * D, KV = static_cast<uint64_t>(kv_heads[l]) * D;
    auto down = [&](GgmlType t, uint64_t row) { return more_bits_type(cfg, t, l, L, row); };
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "attn_q.weight", dense(E), {E, Q}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_k.weight", dense(E), {E, KV}, Init::Projection, l, "--dense-type");
    if (!full(l)) {
      const GgmlType vt = more_bits_type(cfg, cfg.attn_v_type, i_attn_v++, n_attn_v, E);
      p.add(b + "attn_v.weight", vt, {E, KV}, Init::Projection, l, "--dense-type");
    }
    p.add(b + "attn_output.weight", dense(Q), {Q, E}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_q_norm.weight", f32, {D}, Init::Norm, l, "--head-dim");
    p.add(b + "attn_k_norm.weight", f32, {D}, Init::Norm, l, "--head-dim");
    p.add(b + "post_attention_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "layer_output_scale.weight", f32, {1}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_gate.weight", dense(E), {E, FD}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_up.weight", dense(E), {E, FD}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_down.weight", down(cfg.attn_type, FD), {FD, E}, Init::Projection, l, "--dense-type");
    p.add(b + "post_ffw_norm_1.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    p.add(b + "ffn_gate_inp.scale", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "pre_ffw_norm_2.weight", f32, {E}, Init::Norm, l, "--n-embd");
    const GgmlType et = quantize_fallback(cfg.expert_type, E);
    if (cfg.fused_gate_up) {
      p.add(b + "ffn_gate_up_exps.weight", et, {E, 2 * F, X}, Init::Projection, l, "--type");
    } else {
      p.add(b + "ffn_gate_exps.weight", et, {E, F, X}, Init::Projection, l, "--type");
      p.add(b + "ffn_up_exps.weight", et, {E, F, X}, Init::Projection, l, "--type");
    }
    p.add(b + "ffn_down_exps.weight", down(cfg.down_type, F), {F, E, X}, Init::Projection, l, "--n-ff-exp");
    p.add(b + "ffn_down_exps.scale", f32, {X}, Init::Norm, l, "--experts");
    p.add(b + "post_ffw_norm_2.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "post_ffw_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
  }
}

// Like shared/golden/gemma4-f32: 6 layers SSFSSF, SWA 2 KV heads x 64
// (window 8), full 1 KV head x 128 (K = V), dense MLP 192 beside 16 experts
// top-4 of 64, fused gate/up.
void tiny_gemma4(ArchSizes& c) {
  c.n_layer = 6;
  c.n_embd = 256;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 128;
  c.head_dim_swa = 64;
  c.n_head_kv_full = 1;
  c.swa_period = 3;
  c.n_swa = 8;
  c.n_ff = 192;
  c.n_expert = 16;
  c.n_expert_used = 4;
  c.n_ff_exp = 64;
  c.rope_theta = 1e6f;
  c.rope_theta_swa = 1e4f;
  c.context_length = 262144;
}

}  // namespace

extern const ArchSynth synth_gemma4 = {plan_gemma4, tiny_gemma4};

}  // namespace sluice::model
