// Scalar reference of the gated DeltaNet kernels (kernels/deltanet.h).
#include <cstring>

#include "kernels/deltanet.h"
#include "kernels/kernel_table.h"

namespace sluice::kernels {
namespace {

void conv_step_scalar(float* taps, const float* x, const float* w, int64_t K, int64_t C, float* y) {
  for (int64_t c = 0; c < C; ++c) {
    float s = 0.0f;
    for (int64_t i = 0; i + 1 < K; ++i) s += taps[i * C + c] * w[i * C + c];
    s += x[c] * w[(K - 1) * C + c];
    y[c] = s;
  }
  if (K < 2) return;
  std::memmove(taps, taps + C, sizeof(float) * static_cast<size_t>((K - 2) * C));
  std::memcpy(taps + (K - 2) * C, x, sizeof(float) * static_cast<size_t>(C));
}

// decay[i * decay_stride]: one scalar (stride 0) or one per key row (stride 1).
void delta_rule(float* M, const float* q, const float* k, const float* v, const float* decay, int64_t decay_stride,
                float beta, int64_t S, float* u, float* o) {
  for (int64_t j = 0; j < S; ++j) u[j] = 0.0f;
  for (int64_t i = 0; i < S; ++i) {
    float* row = M + i * S;
    const float ki = k[i], di = decay[i * decay_stride];
    for (int64_t j = 0; j < S; ++j) {
      row[j] = row[j] * di;
      u[j] = u[j] + ki * row[j];
    }
  }
  for (int64_t j = 0; j < S; ++j) u[j] = beta * (v[j] - u[j]);
  for (int64_t j = 0; j < S; ++j) o[j] = 0.0f;
  for (int64_t i = 0; i < S; ++i) {
    float* row = M + i * S;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < S; ++j) {
      row[j] = row[j] + ki * u[j];
      o[j] = o[j] + qi * row[j];
    }
  }
}

void delta_step_scalar(float* M, const float* q, const float* k, const float* v, float decay, float beta, int64_t S,
                       float* u, float* o) {
  delta_rule(M, q, k, v, &decay, 0, beta, S, u, o);
}

void kda_step_scalar(float* M, const float* q, const float* k, const float* v, const float* decay, float beta,
                     int64_t S, float* u, float* o) {
  delta_rule(M, q, k, v, decay, 1, beta, S, u, o);
}

}  // namespace

void fill_deltanet_scalar(OpsKernels& k) {
  k.conv_step = conv_step_scalar;
  k.delta_step = delta_step_scalar;
  k.kda_step = kda_step_scalar;
}

}  // namespace sluice::kernels
