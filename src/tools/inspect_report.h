// Renderings of a ModelInfo for `sluice inspect`: one JSON object, or a
// human-readable report. Pure functions of their inputs.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "tools/model_info.h"

namespace sluice::tools {

// Keys: architecture, name, block_count, expert_count, expert_used_count,
// embedding_length, vocab_size, dense_bytes, expert_bytes, token_demand_MiB,
// layer_demand_MiB, min_ram_MiB, kv_context, hyperparameters{}, tokenizer{},
// file{}, sizing{} (every figure in bytes, plus per-layer), tensors[{name, type,
// shape, offset, bytes, split}], and metadata{} (arrays over 16 elements are
// summarised as {"array": elem type, "n": count}). Absent values are null.
nlohmann::json inspect_json(const ModelInfo& info, const gguf::Metadata& metadata);

// Summary, sizing and a tensor table collapsed by family ("blk.N.x" -> one line
// with a count) unless full_tensors.
std::string inspect_text(const ModelInfo& info, bool full_tensors);

}  // namespace sluice::tools
