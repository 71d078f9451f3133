// llama (llama.cpp src/models/llama.cpp): dense SwiGLU FFN, or Mixtral-style
// routed experts when llama.expert_count > 0 (softmax over all experts, top-k,
// renormalised: equal to Mixtral's softmax over the top-k logits). RoPE NORM
// (adjacent pairs) applied to q/k as stored; no q/k norm.
#include "model/architectures.h"
#include "model/transformer.h"

namespace sluice::model {

std::unique_ptr<Model> make_llama(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, HParams hp) {
  hp.rope_type = RopeType::Norm;
  ArchSpec spec;
  spec.qk_norm = false;
  spec.renormalize_topk = true;
  return std::make_unique<Transformer>(std::move(gguf), cfg, std::move(hp), spec);
}

}  // namespace sluice::model
