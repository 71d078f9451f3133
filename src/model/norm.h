// RMSNorm as llama.cpp computes it: y = x * (1 / sqrt(mean(x^2) + eps)) * w,
// with the sum of squares accumulated in double and the scale applied in float;
// and ggml's L2 norm.
#pragma once

#include <cstdint>

namespace sluice::model {

// y[i] = x[i] * scale * w[i]; w may be null (no weight). x and y may alias.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);

// Applies rms_norm to n_rows consecutive rows of length n.
void rms_norm_rows(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* y);

// x <- x / max(||x||, eps) in place (ggml_l2_norm; the DeltaNet mixers' q and k).
void l2_norm(float* x, int64_t n, float eps);

}  // namespace sluice::model
