// NEON dot products of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS with Q8_K activations, bit-identical
// to the x86 AVX2 kernels (same float order; kquant_neon_body.h). Two builds of
// the same body, chosen at run time from the hwcaps: plain Advanced SIMD
// (widening multiplies, every AArch64 CPU) and the armv8.2-a dot product
// (sdot). They differ only in how a 32-byte run's eight lane sums are formed
// and multiplied by the sub-block scales; the integer results are the same.
#include "kernels/arm/kquant_neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "kernels/arm/k4_neon.h"
#include "kernels/arm/neon_half.h"
#include "kernels/blocks_kquant.h"
#include "kernels/tables.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace sluice::kernels {
namespace neon_kquant {

// Plain Advanced SIMD: byte products widened to int16 (smull), then pairwise
// adds down to the eight sums of four, still int16, then one widening
// multiply-add by the scale per four lanes (smlal by element). The int16 sums
// do not overflow: weights are 0..63 and activations -128..127, so a sum of
// four is at most 4 * 63 * 128 = 32256.
namespace plain {

struct Scales {
  int16x8_t v;
};
inline Scales make_scales(int16x8_t s) { return {s}; }

inline int16x8_t sums_of_four(int8x16_t q0, int8x16_t q1, int8x16_t y0, int8x16_t y1) {
  const int16x8_t p0 = vmull_s8(vget_low_s8(q0), vget_low_s8(y0));
  const int16x8_t p1 = vmull_high_s8(q0, y0);
  const int16x8_t p2 = vmull_s8(vget_low_s8(q1), vget_low_s8(y1));
  const int16x8_t p3 = vmull_high_s8(q1, y1);
  return vpaddq_s16(vpaddq_s16(p0, p1), vpaddq_s16(p2, p3));  // lane m: products 4m..4m+3
}

// Pairs of products fit int16 (at most 2 * 127 * 128), fours do not: the
// pair sums are widened as they are added.
inline int32x4_t sums4_wide(int8x16_t q, int8x16_t y) {
  return vpaddlq_s16(vpaddq_s16(vmull_s8(vget_low_s8(q), vget_low_s8(y)), vmull_high_s8(q, y)));
}

#define SLUICE_NEON_TARGET
template <int kLo, int kHi, class A>
inline void run_acc(A& acc, int8x16_t q0, int8x16_t q1, int8x16_t y0, int8x16_t y1, const Scales& s) {
  const int16x8_t f = sums_of_four(q0, q1, y0, y1);
  acc.lo = vmlal_laneq_s16(acc.lo, vget_low_s16(f), s.v, kLo);
  acc.hi = vmlal_high_laneq_s16(acc.hi, f, s.v, kHi);
}
#include "kernels/arm/kquant_neon_body.h"
#include "kernels/arm/kquant_neon_q23_body.h"
#include "kernels/arm/kquant_neon_fill_body.h"
#undef SLUICE_NEON_TARGET

}  // namespace plain

// armv8.2-a dot product: sdot forms the four-product lane sums of 16 bytes in
// one instruction; each is then multiplied by its scale (mla by element).
namespace dotprod {

#define SLUICE_NEON_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
struct Scales {
  int32x4_t lo, hi;  // scales 0-3, 4-7
};
SLUICE_NEON_TARGET inline Scales make_scales(int16x8_t s) {
  return {vmovl_s16(vget_low_s16(s)), vmovl_high_s16(s)};
}

template <int k>
SLUICE_NEON_TARGET inline int32x4_t mla_scale(int32x4_t acc, int32x4_t v, const Scales& s) {
  if constexpr (k < 4) {
    return vmlaq_laneq_s32(acc, v, s.lo, k);
  } else {
    return vmlaq_laneq_s32(acc, v, s.hi, k - 4);
  }
}

SLUICE_NEON_TARGET inline int32x4_t sums4_wide(int8x16_t q, int8x16_t y) { return vdotq_s32(vdupq_n_s32(0), q, y); }

template <int kLo, int kHi, class A>
SLUICE_NEON_TARGET inline void run_acc(A& acc, int8x16_t q0, int8x16_t q1, int8x16_t y0, int8x16_t y1,
                                       const Scales& s) {
  acc.lo = mla_scale<kLo>(acc.lo, vdotq_s32(vdupq_n_s32(0), q0, y0), s);
  acc.hi = mla_scale<kHi>(acc.hi, vdotq_s32(vdupq_n_s32(0), q1, y1), s);
}
#include "kernels/arm/kquant_neon_body.h"
#include "kernels/arm/kquant_neon_q23_body.h"
#include "kernels/arm/kquant_neon_fill_body.h"
#undef SLUICE_NEON_TARGET

}  // namespace dotprod
}  // namespace neon_kquant

void fill_kquant_neon_tier(KernelTable& table, NeonTier tier) {
  if (tier == NeonTier::Dotprod) {
    neon_kquant::dotprod::fill(table);
  } else {
    neon_kquant::plain::fill(table);
  }
}

void fill_kquant_neon(KernelTable& table) {
  fill_kquant_neon_tier(table, cpu_features().neon_dotprod ? NeonTier::Dotprod : NeonTier::Plain);
}

}  // namespace sluice::kernels

#endif  // __aarch64__
