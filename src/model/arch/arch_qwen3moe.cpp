// qwen3moe (llama.cpp's src/models/qwen3moe.cpp): per-head RMSNorm of q and k
// before NEOX RoPE, routed experts with softmax gating and renormalised top-k
// weights (Qwen3's norm_topk_prob, hard-wired: there is no GGUF key), no
// shared expert.
#include "model/arch.h"

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

}  // namespace sluice::model
