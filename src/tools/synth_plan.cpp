// PlanBuilder (the pieces every architecture's plan shares) and the dispatch
// from SynthConfig::arch to the architecture files.
#include "tools/synth_plan.h"

#include <algorithm>

#include "util/error.h"

namespace sluice::tools {
namespace {

// llama.cpp's general.file_type (llama_ftype) that best describes the mix,
// keyed by the expert type since experts hold almost all the bytes.
uint32_t file_type_for(GgmlType expert_type) {
  switch (expert_type) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::Q4_K: return 15;  // MOSTLY_Q4_K_M
    case GgmlType::Q6_K: return 18;
    case GgmlType::BF16: return 32;
    case GgmlType::MXFP4: return 38;  // MOSTLY_MXFP4_MOE
    default: return 0;
  }
}

}  // namespace

void PlanBuilder::add(std::string name, GgmlType type, std::vector<uint64_t> ne, Init init, uint32_t layer,
                      const char* flag) {
  if (!ggml_row_bytes(type, ne[0]))
    fail(flag, std::string(ggml_type_name(type)) + " needs rows that are a multiple of " +
                   std::to_string(ggml_type_info(type).block_elems) + " values, but " + name + " has rows of " +
                   std::to_string(ne[0]));
  plan_.tensors.push_back({std::move(name), type, std::move(ne), init, layer, false});
}

void PlanBuilder::general(const SynthConfig& cfg) {
  md("general.architecture", gguf::Value::from_string(cfg.arch));
  md("general.type", gguf::Value::from_string("model"));
  md("general.name", gguf::Value::from_string(cfg.name));
}

void PlanBuilder::file_type(const SynthConfig& cfg) {
  md("general.file_type", gguf::Value::from_u32(file_type_for(cfg.expert_type)));
  md("general.quantization_version", gguf::Value::from_u32(2));
}

uint32_t PlanBuilder::tokenizer(const SynthConfig& cfg, const char* builtin_pre) {
  uint32_t n_vocab = 0;
  for (auto& [k, v] : synth_vocab(cfg.vocab_path, cfg.n_vocab, &n_vocab)) {
    if (builtin_pre && cfg.vocab_path.empty() && k == "tokenizer.ggml.pre") v = gguf::Value::from_string(builtin_pre);
    plan_.metadata.emplace_back(std::move(k), std::move(v));
  }
  return n_vocab;
}

void PlanBuilder::sort_as_quantized() {
  // Block of a tensor, -1 outside blk.N (those come first).
  auto block = [](const PlannedTensor& t) { return t.name.rfind("blk.", 0) == 0 ? int64_t{t.layer} : int64_t{-1}; };
  std::stable_sort(plan_.tensors.begin(), plan_.tensors.end(), [&](const PlannedTensor& x, const PlannedTensor& y) {
    const int64_t bx = block(x), by = block(y);
    return bx != by ? bx < by : x.name < y.name;
  });
}

std::vector<std::string> synth_arch_names() { return {"qwen3moe", "llama", "gpt-oss", "glm4moe", "deepseek2"}; }

SynthPlan synth_plan(const SynthConfig& cfg) {
  validate_synth_config(cfg);
  if (cfg.arch == "qwen3moe") return plan_qwen3moe(cfg);
  if (cfg.arch == "llama") return plan_llama(cfg);
  if (cfg.arch == "gpt-oss") return plan_gpt_oss(cfg);
  if (cfg.arch == "glm4moe") return plan_glm4moe(cfg);
  if (cfg.arch == "deepseek2") return plan_deepseek2(cfg);
  std::string names;
  for (const auto& n : synth_arch_names()) names += (names.empty() ? "" : ", ") + n;
  fail("--arch", "unsupported architecture '" + cfg.arch + "' (supported: " + names + ")");
}

}  // namespace sluice::tools
