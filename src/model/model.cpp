#include "model/model.h"

#include <algorithm>
#include <string>

#include "model/arch.h"
#include "model/transformer.h"
#include "util/error.h"

namespace sluice::model {

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg) {
  if (!gguf) throw Error("load_model: no model");
  ArchDesc desc = describe_architecture(*gguf);
  return std::make_unique<Transformer>(std::move(gguf), cfg, std::move(desc));
}

int prefetch_depth_for_batch(int setting, int top_k, int n_tokens) {
  if (setting == 0 || top_k <= 0) return 0;
  if (setting == kPrefetchPrefill) return n_tokens > 1 ? top_k : 0;
  if (setting == kPrefetchAuto) return std::max(1, top_k / 2);
  if (setting < 0) throw Error("prefetch depth must be >= 0 or auto (got " + std::to_string(setting) + ")");
  return std::min(setting, top_k);
}

int resolve_prefetch_depth(int setting, int top_k) { return prefetch_depth_for_batch(setting, top_k, 1); }

}  // namespace sluice::model
