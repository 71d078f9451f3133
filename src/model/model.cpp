#include "model/model.h"

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

}  // namespace sluice::model
