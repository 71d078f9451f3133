// qwen35moe (llama.cpp's src/models/qwen35moe.cpp): Qwen3.5 / Qwen3.6 MoE, a
// hybrid stack. Layer il is full attention iff (il + 1) % full_attention_interval
// == 0, else a gated DeltaNet layer (AttentionKind::DeltaNet). Full attention
// is gated (attn_q gives per head [query | gate], output * sigmoid(gate)) with
// per-head q/k RMSNorm and IMROPE, which for text positions (p, p, p, 0) is
// NEOX RoPE over the first rope.dimension_count dims when every rotated pair
// belongs to one of the first three sections (checked). Pre-FFN norm
// post_attention_norm; MoE with softmax routing over all experts, top-k
// renormalised (hard-wired), plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp . x). Trailing nextn_predict_layers blocks are
// NextN/MTP heads (a full-attention block), not part of the trunk.
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// IMROPE's stream of rotated pair j (ggml_rope_multi with GGML_ROPE_TYPE_IMROPE):
// sections interleave as t, h, w, t, h, w, ...; a pair past its stream's
// section takes the 4th stream (position 0 for text).
int imrope_stream(uint32_t j, const std::vector<int64_t>& s) {
  const int64_t sector = j;
  if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
  if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
  if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
  return 3;
}

}  // namespace

ArchDesc describe_qwen35moe(const ArchReader& r) {
  ArchDesc d;
  HParams& hp = d.hp;
  hp = r.common();
  hp.rope.type = RopeType::Neox;
  if (!hp.is_moe()) r.bad("expert_count", "qwen35moe needs experts");
  if (hp.head_dim_v != hp.head_dim)
    r.bad("attention.value_length", std::to_string(hp.head_dim_v) + " must equal key_length " +
                                        std::to_string(hp.head_dim) + " (the output gate is per query dim)");
  if (const auto sec = r.model().metadata().get_int_array(r.key("rope.dimension_sections"))) {
    if (sec->size() < 3) r.bad("rope.dimension_sections", "needs at least 3 sections");
    for (int64_t v : *sec)
      if (v < 0 || v > (1 << 16)) r.bad("rope.dimension_sections", "section " + std::to_string(v) + " out of range");
    for (uint32_t j = 0; j < hp.rope.n_rot / 2; ++j)
      if (imrope_stream(j, *sec) == 3)
        r.bad("rope.dimension_sections", "rotated pair " + std::to_string(j) +
                                             " falls in no text section (only text positions are supported)");
  }

  DeltaNetParams& dn = hp.deltanet;
  dn.conv_kernel = r.u32("ssm.conv_kernel");
  dn.state_size = r.u32("ssm.state_size");
  dn.n_k_heads = r.u32("ssm.group_count");
  dn.n_v_heads = r.u32("ssm.time_step_rank");
  constexpr uint32_t kMaxDim = 1u << 16;
  if (dn.conv_kernel == 0 || dn.conv_kernel > 64) r.bad("ssm.conv_kernel", "must be in 1..64");
  if (dn.state_size == 0 || dn.state_size > kMaxDim) r.bad("ssm.state_size", "must be in 1.." + std::to_string(kMaxDim));
  if (dn.n_k_heads == 0 || dn.n_k_heads > kMaxDim) r.bad("ssm.group_count", "must be in 1.." + std::to_string(kMaxDim));
  if (dn.n_v_heads == 0 || dn.n_v_heads > kMaxDim || dn.n_v_heads % dn.n_k_heads != 0)
    r.bad("ssm.time_step_rank", std::to_string(dn.n_v_heads) + " value heads must be a positive multiple of the " +
                                    std::to_string(dn.n_k_heads) + " key heads (ssm.group_count)");
  const uint32_t inner = r.u32("ssm.inner_size");
  if (inner != dn.inner())
    r.bad("ssm.inner_size", std::to_string(inner) + " must be time_step_rank x state_size = " +
                                std::to_string(dn.inner()));

  const uint32_t interval = r.u32("full_attention_interval", 4);
  if (interval == 0) r.bad("full_attention_interval", "must be > 0");
  const uint32_t nextn = r.u32("nextn_predict_layers", 0);
  if (nextn >= hp.n_layer)
    r.bad("nextn_predict_layers", std::to_string(nextn) + " leaves no trunk layer of block_count " +
                                      std::to_string(hp.n_layer));
  const uint32_t trunk = hp.n_layer - nextn;

  LayerDesc attn;
  attn.attn.q_norm = attn.attn.k_norm = Need::Required;
  attn.attn.output_gate = true;
  attn.ffn_norm = "post_attention_norm";
  attn.ffn.kind = FfnKind::Moe;
  attn.ffn.router.kind = RouterKind::SoftmaxAll;
  attn.ffn.router.normalize = true;
  attn.ffn.shared_expert = true;
  attn.ffn.shared_gate = true;
  attn.ffn.n_ff = r.u32("expert_shared_feed_forward_length");
  if (attn.ffn.n_ff == 0) r.bad("expert_shared_feed_forward_length", "must be > 0");
  LayerDesc delta = attn;
  delta.attn = AttentionDesc{};
  delta.attn.kind = AttentionKind::DeltaNet;
  for (uint32_t il = 0; il < trunk; ++il) d.layers.push_back((il + 1) % interval == 0 ? attn : delta);
  for (uint32_t il = trunk; il < hp.n_layer; ++il) {
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    d.nextn.push_back({il, attn});  // a full-attention block
  }
  hp.n_layer = trunk;
  d.tied_output = false;
  return d;
}

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// Names, keys and shapes as llama.cpp's converter writes LLM_ARCH_QWEN35MOE
// (checked against shared/golden/qwen35moe-{f32,kquants,mtp-f32}.gguf): per
// DeltaNet layer attn_qkv {E, 2 Hk S + Hv S} (q, k, v of the Hk key / Hv
// value heads of dim S), attn_gate {E, Hv S}, ssm_conv1d {kernel, 2 Hk S +
// Hv S}, ssm_dt.bias / ssm_a {Hv}, ssm_alpha / ssm_beta {E, Hv}, ssm_norm
// {S}, ssm_out {Hv S, E}; per full-attention layer attn_q {E, 2 q_dim}
// (query and gate per head), attn_k / attn_v {E, kv_dim}, attn_output
// {q_dim, E}, attn_q_norm / attn_k_norm {head_dim}; every layer
// post_attention_norm and the MoE with ffn_gate_inp_shexp {E} and the shared
// expert of n_ff_shexp. cfg.n_nextn NextN blocks (full attention + MoE +
// nextn.eh_proj/enorm/hnorm/shared_head_norm, no own head) follow the trunk.
// Types: attn_type for the dense matrices; with the Q4_K_M rules (q4_k_m_more_bits)
// attn_qkv is Q5_K (llama-quantize's attn_qkv rule for Q4_K_M), ffn_down*
// take Q6_K in use_more_bits(block, block_count) blocks and attn_v in
// use_more_bits(i, block_count) for the i-th attn_v tensor (llama-quantize
// counts attn_v and attn_qkv tensors, one per block, but steps i on attn_v only). ssm_conv1d, ssm_a, ssm_dt, norms
// and routers stay F32 (llama-quantize quantizes none of them). Tensor order:
// llama-quantize's.
void plan_qwen35moe(const ArchSizes& cfg, PlanBuilder& p) {
  if (cfg.n_expert == 0) fail("--experts", "qwen35moe needs at least one expert");
  const uint32_t n_rot = cfg.n_rot ? cfg.n_rot : cfg.head_dim;
  if (n_rot > cfg.head_dim || n_rot % 2 != 0)
    fail("--head-dim", "rope.dimension_count " + std::to_string(n_rot) + " must be even and at most the head dim " +
                           std::to_string(cfg.head_dim));
  if (cfg.full_attention_interval == 0) fail("full_attention_interval", "must be > 0");
  if (cfg.ssm_group_count == 0 || cfg.ssm_time_step_rank % cfg.ssm_group_count != 0)
    fail("ssm.time_step_rank", "value heads must be a positive multiple of the key heads");
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  const uint64_t S = cfg.ssm_state_size, Hk = cfg.ssm_group_count, Hv = cfg.ssm_time_step_rank;
  const uint64_t inner = Hv * S, conv_dim = 2 * Hk * S + inner;
  const uint64_t FS = cfg.n_ff_shexp ? cfg.n_ff_shexp : cfg.n_ff_exp;

  const std::string a = cfg.arch;
  p.general(cfg);
  p.file_type(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(n_blocks));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(cfg.n_head_kv));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(n_rot));
  p.md(a + ".rope.dimension_sections", gguf::Value::from_i32s(cfg.rope_sections));
  p.md(a + ".expert_count", gguf::Value::from_u32(cfg.n_expert));
  p.md(a + ".expert_used_count", gguf::Value::from_u32(cfg.n_expert_used));
  p.md(a + ".expert_feed_forward_length", gguf::Value::from_u32(cfg.n_ff_exp));
  p.md(a + ".expert_shared_feed_forward_length", gguf::Value::from_u32(static_cast<uint32_t>(FS)));
  p.md(a + ".ssm.conv_kernel", gguf::Value::from_u32(cfg.ssm_conv_kernel));
  p.md(a + ".ssm.state_size", gguf::Value::from_u32(cfg.ssm_state_size));
  p.md(a + ".ssm.group_count", gguf::Value::from_u32(cfg.ssm_group_count));
  p.md(a + ".ssm.time_step_rank", gguf::Value::from_u32(cfg.ssm_time_step_rank));
  p.md(a + ".ssm.inner_size", gguf::Value::from_u32(static_cast<uint32_t>(inner)));
  p.md(a + ".full_attention_interval", gguf::Value::from_u32(cfg.full_attention_interval));
  if (cfg.n_nextn > 0) p.md(a + ".nextn_predict_layers", gguf::Value::from_u32(cfg.n_nextn));
  const uint64_t V = p.tokenizer("qwen35");

  const uint64_t E = cfg.n_embd, X = cfg.n_expert, F = cfg.n_ff_exp, D = cfg.head_dim;
  const uint64_t Q = uint64_t{cfg.n_head} * D, KV = uint64_t{cfg.n_head_kv} * D;
  const GgmlType f32 = GgmlType::F32;
  auto dense = [&](uint64_t row) { return quantize_fallback(cfg.attn_type, row); };
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  uint32_t n_attn_v = 0;  // attn_v tensors so far
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto down = [&](GgmlType t, uint64_t row) { return more_bits_type(cfg, t, l, n_blocks, row); };
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    p.add(b + "post_attention_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    const bool full = l >= cfg.n_layer || (l + 1) % cfg.full_attention_interval == 0;
    if (full) {
      p.add(b + "attn_q.weight", dense(E), {E, 2 * Q}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_k.weight", dense(E), {E, KV}, Init::Projection, l, "--dense-type");
      const GgmlType vt = more_bits_type(cfg, cfg.attn_v_type, n_attn_v++, n_blocks, E);
      p.add(b + "attn_v.weight", vt, {E, KV}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_output.weight", dense(Q), {Q, E}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_q_norm.weight", f32, {D}, Init::Norm, l, "--head-dim");
      p.add(b + "attn_k_norm.weight", f32, {D}, Init::Norm, l, "--head-dim");
    } else {
      const GgmlType qkv = quantize_fallback(cfg.q4_k_m_more_bits ? GgmlType::Q5_K : cfg.attn_type, E);
      p.add(b + "attn_qkv.weight", qkv, {E, conv_dim}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_gate.weight", dense(E), {E, inner}, Init::Projection, l, "--dense-type");
      p.add(b + "ssm_conv1d.weight", f32, {cfg.ssm_conv_kernel, conv_dim}, Init::Projection, l, "ssm.conv_kernel");
      p.add(b + "ssm_dt.bias", f32, {Hv}, Init::Bias, l, "ssm.time_step_rank");
      p.add(b + "ssm_a", f32, {Hv}, Init::Decay, l, "ssm.time_step_rank");
      p.add(b + "ssm_beta.weight", dense(E), {E, Hv}, Init::Projection, l, "--dense-type");
      p.add(b + "ssm_alpha.weight", dense(E), {E, Hv}, Init::Projection, l, "--dense-type");
      p.add(b + "ssm_norm.weight", f32, {S}, Init::Norm, l, "ssm.state_size");
      p.add(b + "ssm_out.weight", dense(inner), {inner, E}, Init::Projection, l, "--dense-type");
    }
    p.add(b + "ffn_gate_inp.weight", f32, {E, X}, Init::Router, l, "--n-embd");
    p.add(b + "ffn_gate_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_up_exps.weight", quantize_fallback(cfg.expert_type, E), {E, F, X}, Init::Projection, l, "--type");
    p.add(b + "ffn_down_exps.weight", down(cfg.down_type, F), {F, E, X}, Init::Projection, l, "--n-ff-exp");
    p.add(b + "ffn_gate_inp_shexp.weight", f32, {E}, Init::Projection, l, "--n-embd");
    p.add(b + "ffn_gate_shexp.weight", dense(E), {E, FS}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_up_shexp.weight", dense(E), {E, FS}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_down_shexp.weight", down(cfg.attn_type, FS), {FS, E}, Init::Projection, l, "--n-ff-exp");
    if (l >= cfg.n_layer) add_nextn(p, cfg, b, l, V, /*own_head=*/false);
  }
  p.sort_as_quantized();
}

// Like shared/golden/qwen35moe-f32: 3 DeltaNet + 1 gated attention layer,
// 8 experts top-2 plus a shared expert, IMROPE over half the head.
void tiny_qwen35moe(ArchSizes& c) {
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.n_ff_shexp = 256;
  c.n_rot = 16;
  c.rope_sections = {3, 3, 2, 0};
  c.rope_theta = 1e7f;
  c.context_length = 262144;
  c.ssm_conv_kernel = 4;
  c.ssm_state_size = 32;
  c.ssm_group_count = 2;
  c.ssm_time_step_rank = 4;
  c.full_attention_interval = 4;
}

}  // namespace

extern const ArchSynth synth_qwen35moe = {plan_qwen35moe, tiny_qwen35moe};

}  // namespace sluice::model
