// glm4moe (llama.cpp's src/models/glm4-moe.cpp): GLM-4.5/4.6/4.7.
// Pre-norm: x += Attn(RMSNorm(x)); x += FFN(RMSNorm_post_attention_norm(x)).
// Attention: q/k/v biases (no o bias), optional per-head q/k RMSNorm, partial
// NEOX RoPE over rope.dimension_count dims. The first leading_dense_block_count
// layers have a dense SwiGLU FFN; the others route with sigmoid gating
// (expert_gating_func 2): selection by sigmoid + exp_probs_b, weights the
// unbiased sigmoids, renormalised (expert_weights_norm) and scaled
// (expert_weights_scale), plus expert_shared_count shared experts added
// unweighted. The last nextn_predict_layers blocks are NextN/MTP heads: part
// of block_count, never run by the trunk, not loaded (ignored here).
#include <string>

#include "model/arch.h"

namespace sluice::model {

ArchDesc describe_glm4moe(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Neox;
  if (!d.hp.is_moe()) r.bad("expert_count", "glm4moe needs experts");
  const uint32_t nextn = r.u32("nextn_predict_layers", 0);
  if (nextn >= d.hp.n_layer)
    r.bad("nextn_predict_layers", std::to_string(nextn) + " leaves no trunk layer of block_count " +
                                      std::to_string(d.hp.n_layer));
  const uint32_t trunk = d.hp.n_layer - nextn;
  const uint32_t lead = r.u32("leading_dense_block_count", 0);
  if (lead > trunk) r.bad("leading_dense_block_count", std::to_string(lead) + " exceeds the " +
                                                           std::to_string(trunk) + " trunk layers");
  if (lead > 0 && d.hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for the leading dense layers");
  const uint32_t gating = r.u32("expert_gating_func", 2);
  if (gating != 2) r.bad("expert_gating_func", std::to_string(gating) + " is not supported (2: sigmoid)");
  const uint32_t n_shared = r.u32("expert_shared_count", 0);
  LayerDesc dense, moe;
  dense.attn.q_bias = dense.attn.k_bias = dense.attn.v_bias = Need::Required;
  dense.attn.q_norm = dense.attn.k_norm = Need::Optional;
  dense.ffn_norm = "post_attention_norm";
  moe = dense;
  dense.ffn.kind = FfnKind::Dense;
  dense.ffn.n_ff = d.hp.n_ff;
  moe.ffn.kind = FfnKind::Moe;
  moe.ffn.shared_expert = n_shared > 0;
  moe.ffn.n_ff = d.hp.n_ff_exp * n_shared;
  moe.ffn.router.kind = RouterKind::SigmoidBiased;
  moe.ffn.router.selection_bias = Need::Required;
  moe.ffn.router.normalize = r.flag("expert_weights_norm", false);
  moe.ffn.router.weights_scale = r.f32("expert_weights_scale", 1.0f);
  for (uint32_t il = 0; il < trunk; ++il) d.layers.push_back(il < lead ? dense : moe);
  for (uint32_t il = trunk; il < d.hp.n_layer; ++il) {
    d.ignored.push_back("blk." + std::to_string(il) + ".*");
    d.nextn.push_back({il, moe});  // an ordinary MoE block of this architecture
  }
  d.hp.n_layer = trunk;
  d.tied_output = false;
  return d;
}

}  // namespace sluice::model
