// NEON versions of the element-wise ops whose x86 AVX2 versions round
// differently from scalar (kernels/ops.h): dot, dot_rows, sum_squares,
// exp_sub_sum, swiglu. Each is the AVX2 function (x86/ops_avx2.cpp) written
// with NEON, one x86 8-lane register as two float32x4_t, in the same
// operation order and with the same fused steps, so ARM gets the AVX2 bits.
// The other ops (axpy, add, scale_mul, rope, weighted_sum_rows) are
// bit-identical to scalar on x86, so the scalar ones serve ARM and give the
// same bits already. Built with -ffp-contract=off: every FMA here is explicit.
#include "kernels/arm/ops_neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>

namespace sluice::kernels {
namespace {

struct F32x8 {
  float32x4_t lo, hi;
};

inline F32x8 load8(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
inline F32x8 zero8() { return {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }

// x86's hsum of an 8-lane register: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
inline float hsum8(F32x8 v) {
  const float32x4_t s = vaddq_f32(v.lo, v.hi);
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
}

// Four doubles (x86's __m256d) as two float64x2_t; hsum4d: (t0+t2) + (t1+t3).
struct F64x4 {
  float64x2_t lo = vdupq_n_f64(0.0), hi = vdupq_n_f64(0.0);
};
inline double hsum4d(F64x4 a, F64x4 b) {
  const float64x2_t t_lo = vaddq_f64(a.lo, b.lo), t_hi = vaddq_f64(a.hi, b.hi);
  const float64x2_t s = vaddq_f64(t_lo, t_hi);
  return vgetq_lane_f64(s, 0) + vgetq_lane_f64(s, 1);
}
// acc += the four floats of v, widened.
inline void add_wide(F64x4& acc, float32x4_t v) {
  acc.lo = vaddq_f64(acc.lo, vcvt_f64_f32(vget_low_f32(v)));
  acc.hi = vaddq_f64(acc.hi, vcvt_high_f64_f32(v));
}

// x86's exp8 (Cephes polynomial, same constants and steps) on four lanes.
inline float32x4_t exp4(float32x4_t x) {
  const float32x4_t lo = vdupq_n_f32(-87.0f);
  const uint32x4_t underflow = vcltq_f32(x, lo);
  x = vminq_f32(vmaxq_f32(x, lo), vdupq_n_f32(88.0f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t pow2n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t result = vmulq_f32(p, vreinterpretq_f32_s32(pow2n));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(result), underflow));
}

inline float dot_inline(const float* a, const float* b, int64_t n) {
  F32x8 acc0 = zero8(), acc1 = zero8();
  int64_t i = 0;
  auto fma8 = [](F32x8& acc, const float* x, const float* y) {
    acc.lo = vfmaq_f32(acc.lo, vld1q_f32(x), vld1q_f32(y));
    acc.hi = vfmaq_f32(acc.hi, vld1q_f32(x + 4), vld1q_f32(y + 4));
  };
  for (; i + 16 <= n; i += 16) {
    fma8(acc0, a + i, b + i);
    fma8(acc1, a + i + 8, b + i + 8);
  }
  if (i + 8 <= n) {
    fma8(acc0, a + i, b + i);
    i += 8;
  }
  float s = hsum8({vaddq_f32(acc0.lo, acc1.lo), vaddq_f32(acc0.hi, acc1.hi)});
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

float dot_neon(const float* a, const float* b, int64_t n) { return dot_inline(a, b, n); }

void dot_rows_neon(const float* q, const float* base, int64_t stride, int64_t n_rows, int64_t n, float scale,
                   float* out) {
  if (n == 8) {  // x86's one-vector case: a plain product, then hsum
    const F32x8 vq = load8(q);
    for (int64_t j = 0; j < n_rows; ++j) {
      const F32x8 r = load8(base + j * stride);
      out[j] = hsum8({vmulq_f32(vq.lo, r.lo), vmulq_f32(vq.hi, r.hi)}) * scale;
    }
    return;
  }
  for (int64_t j = 0; j < n_rows; ++j) out[j] = dot_inline(q, base + j * stride, n) * scale;
}

double sum_squares_neon(const float* x, int64_t n) {
  F64x4 acc0, acc1;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F32x8 v = load8(x + i);
    add_wide(acc0, vmulq_f32(v.lo, v.lo));  // products rounded to float, as scalar
    add_wide(acc1, vmulq_f32(v.hi, v.hi));
  }
  double s = hsum4d(acc0, acc1);
  for (; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
  return s;
}

double exp_sub_sum_neon(float* x, float m, int64_t n) {
  const float32x4_t vm = vdupq_n_f32(m);
  F64x4 acc0, acc1;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t lo = exp4(vsubq_f32(vld1q_f32(x + i), vm));
    const float32x4_t hi = exp4(vsubq_f32(vld1q_f32(x + i + 4), vm));
    vst1q_f32(x + i, lo);
    vst1q_f32(x + i + 4, hi);
    add_wide(acc0, lo);
    add_wide(acc1, hi);
  }
  double s = hsum4d(acc0, acc1);
  for (; i < n; ++i) {  // x86 runs the tail through the same vector exp
    x[i] = vgetq_lane_f32(exp4(vdupq_n_f32(x[i] - m)), 0);
    s += x[i];
  }
  return s;
}

inline float32x4_t swiglu4(float32x4_t g, float32x4_t u) {
  const float32x4_t e = exp4(vsubq_f32(vdupq_n_f32(0.0f), g));
  return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
}

void swiglu_neon(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(g + i, swiglu4(vld1q_f32(g + i), vld1q_f32(u + i)));
  for (; i < n; ++i) g[i] = vgetq_lane_f32(swiglu4(vdupq_n_f32(g[i]), vdupq_n_f32(u[i])), 0);
}

}  // namespace

void fill_ops_neon(OpsKernels& k) {
  k.dot = dot_neon;
  k.dot_rows = dot_rows_neon;
  k.sum_squares = sum_squares_neon;
  k.exp_sub_sum = exp_sub_sum_neon;
  k.swiglu = swiglu_neon;
}

}  // namespace sluice::kernels

#endif  // __aarch64__
