// NEON versions of the gated DeltaNet kernels (kernels/deltanet.h): the
// scalar operations per element, 4 lanes per register, mul then add (no FMA;
// the kernels are built with -ffp-contract=off), scalar tails. Bit-identical
// to scalar (and so to AVX2).
#include "kernels/deltanet.h"
#include "kernels/kernel_table.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

namespace sluice::kernels {
namespace {

void conv_step_neon(float* taps, const float* x, const float* w, int64_t K, int64_t C, float* y) {
  int64_t c = 0;
  for (; c + 4 <= C; c += 4) {
    float32x4_t s = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i + 1 < K; ++i) s = vaddq_f32(s, vmulq_f32(vld1q_f32(taps + i * C + c), vld1q_f32(w + i * C + c)));
    s = vaddq_f32(s, vmulq_f32(vld1q_f32(x + c), vld1q_f32(w + (K - 1) * C + c)));
    vst1q_f32(y + c, s);
  }
  for (; c < C; ++c) {
    float s = 0.0f;
    for (int64_t i = 0; i + 1 < K; ++i) s += taps[i * C + c] * w[i * C + c];
    s += x[c] * w[(K - 1) * C + c];
    y[c] = s;
  }
  if (K < 2) return;
  std::memmove(taps, taps + C, sizeof(float) * static_cast<size_t>((K - 2) * C));
  std::memcpy(taps + (K - 2) * C, x, sizeof(float) * static_cast<size_t>(C));
}

void delta_step_neon(float* M, const float* q, const float* k, const float* v, float decay, float beta, int64_t S,
                     float* u, float* o) {
  const int64_t S4 = S - S % 4;
  for (int64_t j = 0; j < S; ++j) u[j] = 0.0f;
  for (int64_t i = 0; i < S; ++i) {
    float* row = M + i * S;
    const float ki = k[i];
    const float32x4_t vk = vdupq_n_f32(ki), vd = vdupq_n_f32(decay);
    for (int64_t j = 0; j < S4; j += 4) {
      const float32x4_t r = vmulq_f32(vld1q_f32(row + j), vd);
      vst1q_f32(row + j, r);
      vst1q_f32(u + j, vaddq_f32(vld1q_f32(u + j), vmulq_f32(vk, r)));
    }
    for (int64_t j = S4; j < S; ++j) {
      row[j] = row[j] * decay;
      u[j] = u[j] + ki * row[j];
    }
  }
  for (int64_t j = 0; j < S; ++j) u[j] = beta * (v[j] - u[j]);
  for (int64_t j = 0; j < S; ++j) o[j] = 0.0f;
  for (int64_t i = 0; i < S; ++i) {
    float* row = M + i * S;
    const float ki = k[i], qi = q[i];
    const float32x4_t vk = vdupq_n_f32(ki), vq = vdupq_n_f32(qi);
    for (int64_t j = 0; j < S4; j += 4) {
      const float32x4_t r = vaddq_f32(vld1q_f32(row + j), vmulq_f32(vk, vld1q_f32(u + j)));
      vst1q_f32(row + j, r);
      vst1q_f32(o + j, vaddq_f32(vld1q_f32(o + j), vmulq_f32(vq, r)));
    }
    for (int64_t j = S4; j < S; ++j) {
      row[j] = row[j] + ki * u[j];
      o[j] = o[j] + qi * row[j];
    }
  }
}

}  // namespace

void fill_deltanet_neon(OpsKernels& k) {
  k.conv_step = conv_step_neon;
  k.delta_step = delta_step_neon;
}

}  // namespace sluice::kernels

#endif  // __aarch64__
