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

namespace sluice::model {

ArchDesc describe_deepseek2(const ArchReader& r) {
  ArchDesc d;
  HParams& hp = d.hp;
  hp = r.common();
  hp.rope.type = RopeType::Norm;
  if (!hp.is_moe()) r.bad("expert_count", "deepseek2 needs experts");
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
  if (hp.n_head_kv != 1) r.bad("attention.head_count_kv", "must be 1 for MLA (got " + std::to_string(hp.n_head_kv) + ")");
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

  const uint32_t nextn = r.u32("nextn_predict_layers", 0);
  if (nextn >= hp.n_layer)
    r.bad("nextn_predict_layers", std::to_string(nextn) + " leaves no trunk layer of block_count " +
                                      std::to_string(hp.n_layer));
  const uint32_t trunk = hp.n_layer - nextn;
  const uint32_t lead = r.u32("leading_dense_block_count", 0);
  if (lead > trunk) r.bad("leading_dense_block_count", std::to_string(lead) + " exceeds the " +
                                                           std::to_string(trunk) + " trunk layers");
  if (lead > 0 && hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for the leading dense layers");
  const uint32_t gating = r.u32("expert_gating_func", 1);
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
  router.n_group = r.u32("expert_group_count", 0);
  router.n_group_used = r.u32("expert_group_used_count", 0);
  if (gating == 2) {
    router.kind = RouterKind::SigmoidBiased;
    router.selection_bias = Need::Optional;  // DeepSeek-V3 and later carry exp_probs_b
  } else if (gating == 1) {
    router.kind = RouterKind::SoftmaxAll;
    if (router.n_group_used > 0 && router.n_group_used < router.n_group)
      r.bad("expert_group_used_count", "group-limited selection with softmax gating is not supported");
  } else {
    r.bad("expert_gating_func", std::to_string(gating) + " is not supported (1: softmax, 2: sigmoid)");
  }
  if (router.n_group > 0 && (hp.n_expert % router.n_group != 0 || router.n_group_used > router.n_group))
    r.bad("expert_group_count", std::to_string(router.n_group) + " groups (" + std::to_string(router.n_group_used) +
                                    " used) do not split " + std::to_string(hp.n_expert) + " experts");
  if (router.n_group > 0 && router.n_group_used > 0 &&
      static_cast<uint64_t>(hp.n_expert / router.n_group) * router.n_group_used < hp.n_expert_used)
    r.bad("expert_group_used_count", "the used groups hold fewer experts than expert_used_count");
  for (uint32_t il = 0; il < trunk; ++il) d.layers.push_back(il < lead ? dense : moe);
  for (uint32_t il = trunk; il < hp.n_layer; ++il) {
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    d.nextn.push_back({il, moe});  // an ordinary MoE block of this architecture
  }
  hp.n_layer = trunk;
  d.tied_output = false;
  return d;
}

}  // namespace sluice::model
