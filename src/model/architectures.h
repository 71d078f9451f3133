// Internal: one factory per supported architecture (each in its own file).
// They describe the architecture's tensors and options to the shared
// Transformer implementation. Use load_model() from outside src/model.
#pragma once

#include <memory>

#include "model/model.h"

namespace sluice::model {

std::unique_ptr<Model> make_qwen3moe(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, HParams hp);
std::unique_ptr<Model> make_llama(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, HParams hp);

}  // namespace sluice::model
