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

}  // namespace sluice::model
