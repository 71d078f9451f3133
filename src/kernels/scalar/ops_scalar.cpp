// Scalar reference versions of the element-wise ops (kernels/ops.h), the
// plain loops the forward pass used before the SIMD versions existed, so the
// scalar ISA computes exactly what it always did.
#include <cmath>

#include "kernels/kernel_table.h"

namespace sluice::kernels {
namespace {

float dot_scalar(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void dot_rows_scalar(const float* q, const float* base, int64_t stride, int64_t n_rows, int64_t n, float scale,
                     float* out) {
  for (int64_t j = 0; j < n_rows; ++j) out[j] = dot_scalar(q, base + j * stride, n) * scale;
}

void weighted_sum_rows_scalar(const float* p, const float* base, int64_t stride, int64_t n_rows, int64_t n,
                              float* out) {
  for (int64_t j = 0; j < n_rows; ++j) {
    const float* row = base + j * stride;
    for (int64_t d = 0; d < n; ++d) out[d] += p[j] * row[d];
  }
}

void axpy_scalar(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void add_scalar(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

double sum_squares_scalar(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

void scale_mul_scalar(const float* x, float s, const float* w, float* y, int64_t n) {
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
  }
}

double exp_sub_sum_scalar(float* x, float m, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

void swiglu_scalar(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void rope_neox_scalar(float* v, const float* c, const float* s, int half) {
  for (int j = 0; j < half; ++j) {
    const float x0 = v[j], x1 = v[j + half];
    v[j] = x0 * c[j] - x1 * s[j];
    v[j + half] = x0 * s[j] + x1 * c[j];
  }
}

void rope_norm_scalar(float* v, const float* c, const float* s, int half) {
  for (int j = 0; j < half; ++j) {
    const float x0 = v[2 * j], x1 = v[2 * j + 1];
    v[2 * j] = x0 * c[j] - x1 * s[j];
    v[2 * j + 1] = x0 * s[j] + x1 * c[j];
  }
}

}  // namespace

void fill_ops_scalar(OpsKernels& k) {
  k.dot = dot_scalar;
  k.axpy = axpy_scalar;
  k.dot_rows = dot_rows_scalar;
  k.weighted_sum_rows = weighted_sum_rows_scalar;
  k.add = add_scalar;
  k.sum_squares = sum_squares_scalar;
  k.scale_mul = scale_mul_scalar;
  k.exp_sub_sum = exp_sub_sum_scalar;
  k.swiglu = swiglu_scalar;
  k.rope_neox = rope_neox_scalar;
  k.rope_norm = rope_norm_scalar;
}

}  // namespace sluice::kernels
