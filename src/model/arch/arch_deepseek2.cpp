// deepseek2 (llama.cpp's src/models/deepseek2.cpp): DeepSeek-V2/V3/R1, Kimi-K2,
// GLM-4.7-Flash. Multi-head latent attention (q LoRA optional), NORM RoPE on
// the rope part with YaRN whose magnitude llama.cpp cancels and moves into the
// score scale: kq_scale = mscale^2 / sqrt(key_length_mla), mscale = 1 +
// yarn_log_multiplier * ln(factor). Leading dense layers, then MoE layers with
// sigmoid gating (expert_gating_func 2) + exp_probs_b selection bias,
// group-limited selection, weight norm and scale, and shared experts; or
// softmax gating (1, DeepSeek-V2) without groups. Trailing NextN/MTP blocks
// (nextn_predict_layers) are not part of the trunk and not loaded.
#include <cmath>
#include <string>

#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {

// MLA's keys (q/kv LoRA ranks, key/value_length_mla, the cached latent row's
// key/value_length) into hp.mla_params, RoPE on the rope part only, and the
// score scale with DeepSeek's YaRN mscale; shared with bailingmoe3.
void describe_mla(const ArchReader& r, HParams& hp) {
  MlaParams& m = hp.mla_params;
  hp.mla = true;
  m.q_lora_rank = r.u32("attention.q_lora_rank", 0);
  m.kv_lora_rank = r.u32("attention.kv_lora_rank");
  m.kv_rope_dim = hp.rope.n_rot;
  m.qk_head_dim = r.u32("attention.key_length_mla");
  m.v_head_dim = r.u32("attention.value_length_mla");
  if (m.kv_lora_rank == 0) r.bad("attention.kv_lora_rank", "must be > 0");
  if (m.qk_head_dim <= m.kv_rope_dim)
    r.bad("attention.key_length_mla", std::to_string(m.qk_head_dim) + " must exceed rope.dimension_count " +
                                          std::to_string(m.kv_rope_dim));
  if (m.v_head_dim == 0) r.bad("attention.value_length_mla", "must be > 0");
  // The cached "head": [compressed kv, rope part]; the values are its first kv_lora_rank dims.
  if (hp.head_dim != m.kv_lora_rank + m.kv_rope_dim)
    r.bad("attention.key_length", std::to_string(hp.head_dim) + " must be kv_lora_rank + rope dims = " +
                                      std::to_string(m.kv_lora_rank + m.kv_rope_dim));
  if (hp.head_dim_v != m.kv_lora_rank)
    r.bad("attention.value_length", std::to_string(hp.head_dim_v) + " must be kv_lora_rank " +
                                        std::to_string(m.kv_lora_rank));
  // RoPE applies to the rope part only (rope.dimension_count of key_length_mla).
  hp.rope.n_rot = m.kv_rope_dim;
  float mscale = 1.0f;
  if (hp.rope.yarn_factor > 0.0f) {
    const float log_mul = r.f32("rope.scaling.yarn_log_multiplier", 0.0f);
    mscale = 1.0f + log_mul * std::log(hp.rope.yarn_factor);
    // Cancels ggml's YaRN magnitude (1 + 0.1 ln factor) on q and k.
    hp.rope.attn_factor = 1.0f / (1.0f + 0.1f * std::log(hp.rope.yarn_factor));
  }
  hp.attn_scale = mscale * mscale / std::sqrt(static_cast<float>(m.qk_head_dim));
}

void describe_expert_groups(const ArchReader& r, const HParams& hp, RouterDesc& router) {
  router.n_group = r.u32("expert_group_count", 0);
  router.n_group_used = r.u32("expert_group_used_count", 0);
  if (router.kind != RouterKind::SigmoidBiased && router.n_group_used > 0 && router.n_group_used < router.n_group)
    r.bad("expert_group_used_count", "group-limited selection with softmax gating is not supported");
  if (router.n_group > 0 && (hp.n_expert % router.n_group != 0 || router.n_group_used > router.n_group))
    r.bad("expert_group_count", std::to_string(router.n_group) + " groups (" + std::to_string(router.n_group_used) +
                                    " used) do not split " + std::to_string(hp.n_expert) + " experts");
  if (router.n_group > 0 && router.n_group_used > 0 &&
      static_cast<uint64_t>(hp.n_expert / router.n_group) * router.n_group_used < hp.n_expert_used)
    r.bad("expert_group_used_count", "the used groups hold fewer experts than expert_used_count");
}

// The deepseek2 declaration, shared with glm-dsa (arch_glm_dsa.cpp): gating
// function 0 or absent means `default_gating` (llama.cpp: softmax for
// deepseek2, sigmoid for glm-dsa).
ArchDesc describe_deepseek2_family(const ArchReader& r, uint32_t default_gating) {
  ArchDesc d;
  HParams& hp = d.hp;
  hp = r.common();
  hp.rope.type = RopeType::Norm;
  if (!hp.is_moe()) r.bad("expert_count", "deepseek2 needs experts");
  if (hp.n_head_kv != 1) r.bad("attention.head_count_kv", "must be 1 for MLA (got " + std::to_string(hp.n_head_kv) + ")");
  describe_mla(r, hp);

  const uint32_t nextn = r.u32("nextn_predict_layers", 0);
  if (nextn >= hp.n_layer)
    r.bad("nextn_predict_layers", std::to_string(nextn) + " leaves no trunk layer of block_count " +
                                      std::to_string(hp.n_layer));
  const uint32_t trunk = hp.n_layer - nextn;
  const uint32_t lead = r.u32("leading_dense_block_count", 0);
  if (lead > trunk) r.bad("leading_dense_block_count", std::to_string(lead) + " exceeds the " +
                                                           std::to_string(trunk) + " trunk layers");
  if (lead > 0 && hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for the leading dense layers");
  uint32_t gating = r.u32("expert_gating_func", 0);
  if (gating == 0) gating = default_gating;
  const uint32_t n_shared = r.u32("expert_shared_count", 0);

  LayerDesc dense, moe;
  dense.attn.kind = AttentionKind::Mla;
  moe = dense;
  dense.ffn.kind = FfnKind::Dense;
  dense.ffn.n_ff = hp.n_ff;
  moe.ffn.kind = FfnKind::Moe;
  moe.ffn.shared_expert = n_shared > 0;
  moe.ffn.n_ff = hp.n_ff_exp * n_shared;
  RouterDesc& router = moe.ffn.router;
  router.normalize = r.flag("expert_weights_norm", false);
  router.weights_scale = r.f32("expert_weights_scale", 1.0f);
  if (gating == 2) {
    router.kind = RouterKind::SigmoidBiased;
    router.selection_bias = Need::Optional;  // DeepSeek-V3 and later carry exp_probs_b
  } else if (gating == 1) {
    router.kind = RouterKind::SoftmaxAll;
  } else {
    r.bad("expert_gating_func", std::to_string(gating) + " is not supported (1: softmax, 2: sigmoid)");
  }
  describe_expert_groups(r, hp, router);
  for (uint32_t il = 0; il < trunk; ++il) d.layers.push_back(il < lead ? dense : moe);
  for (uint32_t il = trunk; il < hp.n_layer; ++il) {
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    d.nextn.push_back({il, moe});  // an ordinary MoE block of this architecture
  }
  hp.n_layer = trunk;
  d.tied_output = false;
  return d;
}

ArchDesc describe_deepseek2(const ArchReader& r) { return describe_deepseek2_family(r, 1); }

// ---- the generator (sluice synth): the tensor/metadata plan

namespace {

// deepseek2 (DeepSeek-V3/R1, Kimi-K2, GLM-4.7-Flash): llama.cpp's
// LLM_ARCH_DEEPSEEK2 names and keys in the converter's current MLA form, as in
// shared/golden/deepseek2-f32.gguf and deepseek2-mtp-f32.gguf: head_count_kv 1,
// key_length = kv_lora_rank + rope dims (the cached latent row), value_length
// = kv_lora_rank, key_length_mla / value_length_mla the per-head q.k and v
// widths, attn_k_b {qk_nope, kv_lora, n_head} and attn_v_b {kv_lora, v_head,
// n_head} (the split attn_kv_b). q LoRA (attn_q_a, attn_q_a_norm, attn_q_b)
// or, with cfg.q_lora_rank 0, attn_q (DeepSeek-V2-Lite) without the
// q_lora_rank key. YaRN keys when cfg.rope_scaling_factor > 1, including
// rope.scaling.yarn_log_multiplier (0.1 * mscale_all_dim in the converter).
// FFN: the shared MoE half (tensor_plan.cpp), plus expert groups. cfg.n_nextn NextN blocks follow
// the trunk with their own embed_tokens and shared_head_head (as the
// DeepSeek-V3 and GLM-4.7-Flash checkpoints carry them).
// Tensor order: llama-quantize's (PlanBuilder::sort_as_quantized).
void plan_deepseek2(const ArchSizes& cfg, PlanBuilder& p) {
  if (cfg.n_expert == 0) fail("--experts", "deepseek2 needs at least one expert");
  if (cfg.n_rot == 0 || cfg.n_rot % 2 != 0 || cfg.n_rot >= cfg.head_dim)
    fail("--head-dim", "deepseek2's rope part (rope.dimension_count " + std::to_string(cfg.n_rot) +
                           ") must be even, > 0 and below key_length_mla " + std::to_string(cfg.head_dim));
  if (cfg.kv_lora_rank == 0 || cfg.head_dim_v == 0) fail("--head-dim", "deepseek2 needs kv_lora_rank and v head dim > 0");
  const uint32_t n_blocks = cfg.n_layer + cfg.n_nextn;
  const std::string a = cfg.arch;
  p.general(cfg);
  p.md(a + ".block_count", gguf::Value::from_u32(n_blocks));
  p.md(a + ".context_length", gguf::Value::from_u32(cfg.context_length));
  p.md(a + ".embedding_length", gguf::Value::from_u32(cfg.n_embd));
  p.md(a + ".feed_forward_length", gguf::Value::from_u32(cfg.n_ff));
  p.md(a + ".attention.head_count", gguf::Value::from_u32(cfg.n_head));
  p.md(a + ".attention.head_count_kv", gguf::Value::from_u32(1));
  p.md(a + ".attention.key_length", gguf::Value::from_u32(cfg.kv_lora_rank + cfg.n_rot));
  p.md(a + ".attention.value_length", gguf::Value::from_u32(cfg.kv_lora_rank));
  p.md(a + ".attention.key_length_mla", gguf::Value::from_u32(cfg.head_dim));
  p.md(a + ".attention.value_length_mla", gguf::Value::from_u32(cfg.head_dim_v));
  if (cfg.q_lora_rank > 0) p.md(a + ".attention.q_lora_rank", gguf::Value::from_u32(cfg.q_lora_rank));
  p.md(a + ".attention.kv_lora_rank", gguf::Value::from_u32(cfg.kv_lora_rank));
  p.md(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(cfg.rms_eps));
  p.md(a + ".rope.dimension_count", gguf::Value::from_u32(cfg.n_rot));
  p.md(a + ".rope.freq_base", gguf::Value::from_f32(cfg.rope_theta));
  if (cfg.rope_scaling_factor > 1.0f) {
    p.md(a + ".rope.scaling.type", gguf::Value::from_string("yarn"));
    p.md(a + ".rope.scaling.factor", gguf::Value::from_f32(cfg.rope_scaling_factor));
    p.md(a + ".rope.scaling.original_context_length", gguf::Value::from_u32(cfg.rope_orig_ctx));
    p.md(a + ".rope.scaling.yarn_log_multiplier", gguf::Value::from_f32(cfg.yarn_log_multiplier));
  }
  add_moe_metadata(p, cfg);
  add_expert_groups(p, cfg);
  p.file_type(cfg);
  const uint64_t V = p.tokenizer();
  p.md(a + ".vocab_size", gguf::Value::from_u32(static_cast<uint32_t>(V)));

  const uint64_t E = cfg.n_embd, H = cfg.n_head, QR = cfg.q_lora_rank, KVR = cfg.kv_lora_rank;
  const uint64_t nope = cfg.head_dim - cfg.n_rot, VH = cfg.head_dim_v;
  const GgmlType f32 = GgmlType::F32, at = cfg.attn_type;
  p.add("token_embd.weight", quantize_fallback(cfg.embd_type, E), {E, V}, Init::Embedding, 0, "--embd-type");
  p.add("output_norm.weight", f32, {E}, Init::Norm, 0, "--n-embd");
  p.add("output.weight", quantize_fallback(cfg.output_type, E), {E, V}, Init::Projection, 0, "--dense-type");
  for (uint32_t l = 0; l < n_blocks; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.add(b + "attn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    if (QR > 0) {
      p.add(b + "attn_q_a.weight", quantize_fallback(at, E), {E, QR}, Init::Projection, l, "--dense-type");
      p.add(b + "attn_q_a_norm.weight", f32, {QR}, Init::Norm, l, "--dense-type");
      p.add(b + "attn_q_b.weight", quantize_fallback(at, QR), {QR, H * cfg.head_dim}, Init::Projection, l,
            "--dense-type");
    } else {
      p.add(b + "attn_q.weight", quantize_fallback(at, E), {E, H * cfg.head_dim}, Init::Projection, l, "--dense-type");
    }
    p.add(b + "attn_kv_a_mqa.weight", quantize_fallback(at, E), {E, KVR + cfg.n_rot}, Init::Projection, l,
          "--dense-type");
    p.add(b + "attn_kv_a_norm.weight", f32, {KVR}, Init::Norm, l, "--dense-type");
    p.add(b + "attn_k_b.weight", quantize_fallback(at, nope), {nope, KVR, H}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_v_b.weight", quantize_fallback(at, KVR), {KVR, VH, H}, Init::Projection, l, "--dense-type");
    p.add(b + "attn_output.weight", quantize_fallback(at, H * VH), {H * VH, E}, Init::Projection, l, "--dense-type");
    p.add(b + "ffn_norm.weight", f32, {E}, Init::Norm, l, "--n-embd");
    add_moe_ffn(p, cfg, b, l, n_blocks);
    if (l >= cfg.n_layer) add_nextn(p, cfg, b, l, V, /*own_head=*/true);
  }
  p.sort_as_quantized();
}

// DeepSeek-V3-like: MLA with q LoRA, groups, YaRN.
void tiny_deepseek2(ArchSizes& c) {
  c.n_head_kv = 1;
  c.head_dim = 48;  // qk_nope 32 + qk_rope 16
  c.n_rot = 16;
  c.head_dim_v = 32;
  c.q_lora_rank = c.kv_lora_rank = 64;
  c.n_ff = 256;
  c.n_ff_exp = 32;
  c.n_group = 4;
  c.n_group_used = 2;
  c.rope_theta = 1e4f;
  c.rope_scaling_factor = 40.0f;
  c.rope_orig_ctx = 4096;
  c.context_length = 163840;
}

}  // namespace

extern const ArchSynth synth_deepseek2 = {plan_deepseek2, tiny_deepseek2};

}  // namespace sluice::model
