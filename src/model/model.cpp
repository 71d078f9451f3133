#include "model/model.h"

#include <algorithm>
#include <string>

#include "model/architectures.h"
#include "util/error.h"

namespace sluice::model {

std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg) {
  if (!gguf) throw Error("load_model: no model");
  const std::string arch = gguf->architecture();
  // HParams::from_gguf rejects unknown architectures with the standard message.
  HParams hp = HParams::from_gguf(*gguf);
  if (arch == "qwen3moe") return make_qwen3moe(std::move(gguf), cfg, std::move(hp));
  if (arch == "llama") return make_llama(std::move(gguf), cfg, std::move(hp));
  throw Error("unsupported architecture " + arch);
}

int resolve_prefetch_depth(int setting, int top_k) {
  if (setting == 0 || top_k <= 0) return 0;
  if (setting == kPrefetchAuto) return std::max(1, top_k / 2);
  if (setting < 0) throw Error("prefetch depth must be >= 0 or auto (got " + std::to_string(setting) + ")");
  return std::min(setting, top_k);
}

}  // namespace sluice::model
