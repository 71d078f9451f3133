// Element-wise and small-vector float kernels of the forward pass (RMSNorm,
// RoPE, softmax, SwiGLU, attention dot products), one implementation per ISA
// chosen once at run time like the quant kernels (kernels/quant.h).
//
// Contracts (every implementation, every ISA):
//  - Pure functions of their inputs; thread-safe; no allocation; n >= 0 and any
//    n is allowed (no block-size requirement, SIMD versions handle tails).
//  - Deterministic for a given ISA: a fixed summation order that depends only
//    on n, never on thread count or alignment. The scalar versions are the
//    reference; SIMD versions match them within float rounding of a reordered
//    sum (dot, sum_squares, exp_sub_sum) or of a vectorised expf (exp_sub_sum,
//    swiglu: a few ulp); scale_mul, axpy, add and rope are bit-identical to
//    scalar (same per-element operations). tests/unit/ops_test.cpp checks this.
//  - Pointers may alias only where stated.
#pragma once

#include <cstdint>

#include "kernels/quant.h"

namespace sluice::kernels {

struct OpsKernels {
  // sum_i a[i] * b[i], float accumulation.
  float (*dot)(const float* a, const float* b, int64_t n) = nullptr;
  // y[i] += a * x[i] (rounded product, then add: no FMA, so SIMD == scalar).
  void (*axpy)(float a, const float* x, float* y, int64_t n) = nullptr;
  // y[i] += x[i].
  void (*add)(float* y, const float* x, int64_t n) = nullptr;
  // sum_i x[i]*x[i]: each product rounded to float, the sum accumulated in
  // double (as llama.cpp's RMSNorm does).
  double (*sum_squares)(const float* x, int64_t n) = nullptr;
  // y[i] = (x[i] * s) * w[i], or x[i] * s when w is null. x and y may alias.
  void (*scale_mul)(const float* x, float s, const float* w, float* y, int64_t n) = nullptr;
  // x[i] = exp(x[i] - m) in place; returns the sum of the new x[i] in double.
  double (*exp_sub_sum)(float* x, float m, int64_t n) = nullptr;
  // g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i] in place.
  void (*swiglu)(float* g, const float* u, int64_t n) = nullptr;
  // Attention over n_rows cached rows (row j at base + j * stride, n floats):
  // out[j] = dot(q, row j) * scale (scores; each as `dot` computes it for that
  // ISA, times scale).
  void (*dot_rows)(const float* q, const float* base, int64_t stride, int64_t n_rows, int64_t n, float scale,
                   float* out) = nullptr;
  // out[d] += sum_j p[j] * row_j[d] for d < n, accumulated onto out's values
  // in ascending j as out[d] += p[j] * row_j[d] (rounded product, then add),
  // so every ISA gives the scalar result bit for bit, and rows taken in
  // consecutive blocks give what one call over all of them gives (attention
  // walks the cache a block at a time). out must not alias the rows or p.
  void (*weighted_sum_rows)(const float* p, const float* base, int64_t stride, int64_t n_rows, int64_t n,
                            float* out) = nullptr;
  // Rotates one head in place by the angles (cos[j], sin[j]), j < half:
  // neox pairs (j, j + half), norm pairs (2j, 2j + 1).
  void (*rope_neox)(float* v, const float* cos, const float* sin, int half) = nullptr;
  void (*rope_norm)(float* v, const float* cos, const float* sin, int half) = nullptr;

  // Gated DeltaNet (kernels/deltanet.h has the contracts): one token of the
  // causal depthwise conv over the K-1 cached taps, and one token of one
  // head's delta-rule state update. Both bit-identical on every ISA.
  void (*conv_step)(float* taps, const float* x, const float* w, int64_t K, int64_t C, float* y) = nullptr;
  void (*delta_step)(float* M, const float* q, const float* k, const float* v, float decay, float beta, int64_t S,
                     float* u, float* o) = nullptr;
  // Kimi Delta Attention's step: delta_step with one decay per key row.
  void (*kda_step)(float* M, const float* q, const float* k, const float* v, const float* decay, float beta,
                   int64_t S, float* u, float* o) = nullptr;
};

// The fastest complete set this CPU runs (chosen once, thread-safe): SIMD
// entries where the ISA has them, scalar for the rest.
const OpsKernels& ops();

// One ISA's own entries, or nullptr when the CPU lacks it / it has none.
// Entries of a SIMD set may be partial (missing ones are nullptr).
const OpsKernels* ops_for(Isa isa);

}  // namespace sluice::kernels
