// Gated feed-forward network: down(act(gate x + bg, up x + bu)) + bd, the dense
// FFN of llama, shared experts and the body of every routed expert.
//   SwiGlu:    act(g, u) = silu(g) * u, silu(g) = g / (1 + exp(-g))
//   SwiGluOai: act(g, u) = g' * sigmoid(1.702 g') * (u' + 1) with g' = min(g, 7),
//              u' = clamp(u, -7, 7) (gpt-oss; llama.cpp's swiglu_oai)
//   GeluTanh:  act(g, u) = gelu_tanh(g) * u (Gemma 4)
//   SwiGluClamped: act(g, u) = silu(min(g, L)) * clamp(u, -L, L) (DeepSeek V4;
//              `clamp` L; off, i.e. SwiGlu, when L <= 1e-6 as in llama.cpp)
// Biases are optional (null: none).
#pragma once

#include <span>
#include <vector>

#include "model/arch.h"
#include "model/matmul.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct FfnMatrices {
  WeightMatrix gate;  // n_embd -> n_ff
  WeightMatrix up;    // n_embd -> n_ff
  WeightMatrix down;  // n_ff -> n_embd
};

struct FfnBiases {
  const float* gate = nullptr;  // n_ff
  const float* up = nullptr;    // n_ff
  const float* down = nullptr;  // down.n_out
};

// The activation in place over n hidden units: g[i] = act(g[i], u[i]).
void apply_activation(Activation act, float* g, const float* u, int64_t n, float clamp = 0.0f);

// Reusable scratch for SwiGLU evaluations; not thread-safe (one per model).
class SwiGlu {
 public:
  // act_gate[i] / act_up[i]: input row i already converted to gate's / up's
  // vec_dot_type. Writes n = act_gate.size() rows of down.n_out floats to out
  // (row i at out + i * out_stride).
  void run(const FfnMatrices& m, Activation act, const FfnBiases& bias, std::span<const void* const> act_gate,
           std::span<const void* const> act_up, float* out, int64_t out_stride, ThreadPool& pool,
           float clamp = 0.0f);

 private:
  std::vector<float> g_, u_;
  QuantizedRows hidden_q_;
  TiledActivations tiled_gate_, tiled_up_;  // tile-GEMM weights: positions re-laid once
  std::vector<const void*> hidden_rows_;
};

}  // namespace sluice::model
