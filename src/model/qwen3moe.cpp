// qwen3moe (llama.cpp src/models/qwen3moe.cpp): per-head RMSNorm of q and k
// before NEOX RoPE, routed experts with softmax gating and renormalised top-k
// weights (Qwen3's norm_topk_prob, hard-wired: there is no GGUF key), no
// shared expert.
#include "model/architectures.h"
#include "model/transformer.h"
#include "util/error.h"

namespace sluice::model {

std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, HParams hp) {
  if (!hp.is_moe()) throw Error("qwen3moe model has no experts (qwen3moe.expert_count is 0)");
  hp.rope_type = RopeType::Neox;
  ArchSpec spec;
  spec.qk_norm = true;
  spec.renormalize_topk = true;
  return std::make_unique<Transformer>(std::move(gguf), cfg, std::move(hp), spec);
}

}  // namespace sluice::model
