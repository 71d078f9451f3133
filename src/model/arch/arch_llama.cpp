// llama (llama.cpp's src/models/llama.cpp): pre-norm decoder, RoPE NORM
// (adjacent pairs) on q/k as stored, no q/k norm, no biases. Dense SwiGLU FFN,
// or Mixtral-style routed experts when llama.expert_count > 0 (softmax over
// all experts, top-k, renormalised: equal to Mixtral's softmax over the top-k
// logits).
#include "model/arch.h"

namespace sluice::model {

ArchDesc describe_llama(const ArchReader& r) {
  ArchDesc d;
  d.hp = r.common();
  d.hp.rope.type = RopeType::Norm;
  if (!d.hp.is_moe() && d.hp.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for a dense model");
  LayerDesc l;
  if (d.hp.is_moe()) {
    l.ffn.kind = FfnKind::Moe;
    l.ffn.router.kind = RouterKind::SoftmaxAll;
    l.ffn.router.normalize = true;
  } else {
    l.ffn.kind = FfnKind::Dense;
    l.ffn.n_ff = d.hp.n_ff;
  }
  d.layers.assign(d.hp.n_layer, l);
  d.ignored = {"rope_freqs.weight"};  // llama-3 long-context factors: not applied (no llama3 rope scaling yet)
  return d;
}

}  // namespace sluice::model
