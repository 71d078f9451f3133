// Internal to synth: the list of tensors to write and how each is initialised.
// The architecture's generator (model/arch/arch_<name>.cpp, registered in
// registry.def) turns a validated SynthConfig into a SynthPlan through
// PlanBuilder; synth.cpp streams the plan to disk through RowGenerator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "model/arch/tensor_plan.h"
#include "tools/synth.h"
#include "tools/synth_random.h"

namespace sluice::tools {

// The plan types live with the architecture declarations (model/arch/tensor_plan.h).
using model::Init;
using model::PlanBuilder;
using model::PlannedTensor;
using model::SynthPlan;

// Validates cfg, then asks the generator registered for cfg.arch for the plan.
SynthPlan synth_plan(const SynthConfig& cfg);

// Runs produce(i, buffer) for chunks 0..n_chunks-1 on `threads` workers and
// consume(i, buffer) on the calling thread in chunk order, with at most
// `slots` buffers in flight. Whatever a worker or consume throws (including
// std::bad_alloc) stops all workers, is joined, and is rethrown here as one
// sluice::Error (an Error as is, anything else wrapped with its what()).
void run_chunk_pipeline(size_t n_chunks, unsigned threads, size_t slots,
                        const std::function<void(size_t, std::vector<uint8_t>&)>& produce,
                        const std::function<void(size_t, std::vector<uint8_t>&)>& consume);

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
