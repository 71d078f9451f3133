// SiLU-gated feed-forward network: down(silu(gate x) * up x), the dense FFN of
// llama and the body of every routed expert. silu(g) = g / (1 + exp(-g)).
#pragma once

#include <span>
#include <vector>

#include "model/matmul.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct FfnMatrices {
  WeightMatrix gate;  // n_embd -> n_ff
  WeightMatrix up;    // n_embd -> n_ff
  WeightMatrix down;  // n_ff -> n_embd
};

// Reusable scratch for SwiGLU evaluations; not thread-safe (one per model).
class SwiGlu {
 public:
  // act_gate[i] / act_up[i]: input row i already converted to gate's / up's
  // vec_dot_type. Writes n = act_gate.size() rows of down.n_out floats to out
  // (row i at out + i * out_stride).
  void run(const FfnMatrices& m, std::span<const void* const> act_gate, std::span<const void* const> act_up,
           float* out, int64_t out_stride, ThreadPool& pool);

 private:
  std::vector<float> g_, u_;
  QuantizedRows hidden_q_;
  TiledActivations tiled_gate_, tiled_up_;  // tile-GEMM weights: positions re-laid once
  std::vector<const void*> hidden_rows_;
};

}  // namespace sluice::model
