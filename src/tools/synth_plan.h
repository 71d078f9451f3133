// Internal to synth: the list of tensors to write and how each is initialised.
// An architecture file (synth_qwen3moe.cpp) turns a SynthConfig into a
// SynthPlan; synth.cpp streams the plan to disk through RowGenerator.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tools/synth.h"
#include "tools/synth_random.h"

namespace sluice::tools {

// How a tensor's values are drawn (rows are ne[0] long).
enum class Init {
  Projection,  // N(0, 1/ne[0]): keeps activations O(1) (fan_in = row length)
  Norm,        // 1 + 0.05 N(0,1)
  Router,      // projection rows orthogonal to u, plus g_{layer,e} * u (skewed routing)
  Embedding,   // N(0,1) + sqrt(n_embd) * u: every token shares the direction u
};

struct PlannedTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;
  Init init = Init::Projection;
  uint32_t layer = 0;
  bool direct = false;  // bytes from generate_direct_row instead of quantizing floats
};

struct SynthPlan {
  std::vector<std::pair<std::string, gguf::Value>> metadata;
  std::vector<PlannedTensor> tensors;
};

// Validates cfg for qwen3moe and builds its plan (names and shapes as llama.cpp).
SynthPlan plan_qwen3moe(const SynthConfig& cfg);

// Generates rows of planned tensors. Immutable after construction: safe to
// call from several threads. Row r of tensor t is a function of (seed, t.name, r).
class RowGenerator {
 public:
  RowGenerator(const SynthConfig& cfg, uint32_t n_embd, uint32_t n_layer, uint32_t n_expert);
  // Writes row `row` of t (ne[0] values) into dst as t.type bytes. `scratch`
  // must hold ne[0] floats (unused for direct rows).
  void row(const PlannedTensor& t, uint64_t row, void* dst, float* scratch) const;
  // Float values of one row (exact path), exposed for tests.
  void float_row(const PlannedTensor& t, uint64_t row, float* out) const;

  const std::vector<float>& shared_direction() const { return u_; }
  // Per-expert router affinity to u for a layer (the logit offset it gives).
  float router_affinity(uint32_t layer, uint32_t expert) const { return affinity_[layer * n_expert_ + expert]; }

 private:
  uint64_t seed_;
  uint32_t n_embd_, n_expert_;
  std::vector<float> u_;         // unit vector, n_embd
  std::vector<float> affinity_;  // n_layer * n_expert: logit offsets s_{l,e}
};

}  // namespace sluice::tools
