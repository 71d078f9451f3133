// NEON dot products of the symmetric legacy formats (Q4_0, Q5_0, Q8_0, IQ4_NL,
// MXFP4) against Q8_0 activations and of the offset formats (Q4_1, Q5_1)
// against Q8_1, single- and multi-column, and of F32, F16
// and BF16, all bit-identical to the x86 AVX2 kernels (same float order). Two builds of the same body:
// plain Advanced SIMD (widening multiplies, every AArch64 CPU) and the
// armv8.2-a dot product (sdot), chosen at run time from the hwcaps.
#include "kernels/arm/legacy_neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <array>
#include <cmath>
#include <cstring>
#include <tuple>

#include "kernels/arm/neon_half.h"
#include "kernels/blocks_legacy.h"
#include "kernels/tables.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace sluice::kernels {
namespace neon {
namespace {

// Weight decoders: the 32 levels of a block as two int8x16 (elements 0..15
// and 16..31, the order of the activation's qs) and the block's scale.
struct Q4_0Levels {
  using Block = BlockQ4_0;
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
  }
  static float scale(const Block& b) { return half_to_float(b.d); }
};
// Q5_0: level = (nibble | bit e of qh << 4) - 16. Each qh byte is spread
// over eight lanes and tested against its lane's bit (elements 0..15 take
// bytes 0-1, elements 16..31 bytes 2-3).
struct Q5_0Levels {
  using Block = BlockQ5_0;
  template <int kByte>
  static uint8x16_t fifth_bits(uint8x8_t qh) {
    const uint8x16_t lane_bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vcombine_u8(vdup_lane_u8(qh, kByte), vdup_lane_u8(qh, kByte + 1));
    return vandq_u8(vtstq_u8(bytes, lane_bit), vdupq_n_u8(0x10));
  }
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    uint32_t bits = 0;
    std::memcpy(&bits, b.qh, sizeof bits);
    const uint8x8_t qh = vcreate_u8(bits);
    const uint8x16_t q = vld1q_u8(b.qs);
    const uint8x16_t l = vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0f)), fifth_bits<0>(qh));
    const uint8x16_t h = vorrq_u8(vshrq_n_u8(q, 4), fifth_bits<2>(qh));
    lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(16));
    hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(16));
  }
  static float scale(const Block& b) { return half_to_float(b.d); }
};
// Offset formats (x = d * q + m, Q8_1 activations): unsigned levels, which
// fit int8 (Q4_1 0..15, Q5_1 0..31).
struct Q4_1Levels {
  using Block = BlockQ4_1;
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
    hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
  }
  static float scale(const Block& b) { return half_to_float(b.d); }
  static float offset(const Block& b) { return half_to_float(b.m); }
};
struct Q5_1Levels {
  using Block = BlockQ5_1;
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    uint32_t bits = 0;
    std::memcpy(&bits, b.qh, sizeof bits);
    const uint8x8_t qh = vcreate_u8(bits);
    const uint8x16_t q = vld1q_u8(b.qs);
    lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0f)), Q5_0Levels::fifth_bits<0>(qh)));
    hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), Q5_0Levels::fifth_bits<2>(qh)));
  }
  static float scale(const Block& b) { return half_to_float(b.d); }
  static float offset(const Block& b) { return half_to_float(b.m); }
};
struct Q8_0Levels {
  using Block = BlockQ8_0;
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) {
    lo = vld1q_s8(b.qs);
    hi = vld1q_s8(b.qs + 16);
  }
  static float scale(const Block& b) { return half_to_float(b.d); }
};
// IQ4_NL and MXFP4: 4-bit codes looked up in a 16-entry int8 table.
template <const int8_t* kTable>
inline void table_levels(const uint8_t* qs, int8x16_t& lo, int8x16_t& hi) {
  const int8x16_t table = vld1q_s8(kTable);
  const uint8x16_t q = vld1q_u8(qs);
  lo = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0f)));
  hi = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
}
struct Iq4NlLevels {
  using Block = BlockIq4Nl;
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) { table_levels<kIq4nlValues>(b.qs, lo, hi); }
  static float scale(const Block& b) { return half_to_float(b.d); }
};
// e8m0_to_fp32_half of every byte: one load per block instead of a compare and shifts.
constexpr std::array<float, 256> kE8m0Half = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[static_cast<size_t>(e)] = e8m0_to_fp32_half(static_cast<uint8_t>(e));
  return t;
}();
struct Mxfp4Levels {
  using Block = BlockMxfp4;
  static void levels(const Block& b, int8x16_t& lo, int8x16_t& hi) { table_levels<kMxfp4Values>(b.qs, lo, hi); }
  static float scale(const Block& b) { return kE8m0Half[b.e]; }
};

}  // namespace

// Plain Advanced SIMD: widening multiplies, then pairwise adds down to sums
// of four (the int16 products fit: |w a| <= 128 * 127; activations never
// hold -128, legacy_impl.h).
namespace plain {
inline int32x4_t sums_of_four(int8x16_t w, int8x16_t a) {
  const int32x4_t lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(a)));   // (0+1), (2+3), ...
  const int32x4_t hi = vpaddlq_s16(vmull_s8(vget_high_s8(w), vget_high_s8(a)));  // (8+9), ...
  return vpaddq_s32(lo, hi);  // 0..3, 4..7, 8..11, 12..15
}
inline void lanes8(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1, int32x4_t& lo, int32x4_t& hi) {
  lo = sums_of_four(w0, a0);
  hi = sums_of_four(w1, a1);
}
#define SLUICE_NEON_TARGET
#include "kernels/arm/legacy_neon_body.h"
#undef SLUICE_NEON_TARGET
}  // namespace plain

// armv8.2-a dot product: sdot sums four consecutive int8 products per lane.
namespace dotprod {
#define SLUICE_NEON_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
SLUICE_NEON_TARGET inline void lanes8(int8x16_t w0, int8x16_t w1, int8x16_t a0, int8x16_t a1, int32x4_t& lo,
                                      int32x4_t& hi) {
  lo = vdotq_s32(vdupq_n_s32(0), w0, a0);
  hi = vdotq_s32(vdupq_n_s32(0), w1, a1);
}
#include "kernels/arm/legacy_neon_body.h"
#undef SLUICE_NEON_TARGET
}  // namespace dotprod

// Plain float formats in the float order of x86's dot_plain
// (x86/legacy_avx2_dot.cpp): four 8-lane fused-multiply-add accumulators over
// 32-element steps, then 8-element steps into the first, the accumulators
// added ((0+1)+(2+3)) and reduced as x86's hsum does, then the last n % 8
// elements by scalar fused multiply-adds (the x86 build contracts that tail).
// F16 and BF16 convert exactly to float first, as on x86.
namespace {

struct F32Load {
  using Elem = float;
  static float32x4_t load(const float* p) { return vld1q_f32(p); }
  static float scalar(float v) { return v; }
};
struct F16Load {
  using Elem = uint16_t;
  static float32x4_t load(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float scalar(uint16_t v) { return fp16_to_fp32(v); }
};
struct Bf16Load {
  using Elem = uint16_t;
  static float32x4_t load(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static float scalar(uint16_t v) { return bf16_to_fp32(v); }
};

// One x86 8-lane register as two NEON halves.
struct F32x8 {
  float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
};

template <class L>
inline void fma8(F32x8& acc, const typename L::Elem* x, const typename L::Elem* y) {
  acc.lo = vfmaq_f32(acc.lo, L::load(x), L::load(y));
  acc.hi = vfmaq_f32(acc.hi, L::load(x + 4), L::load(y + 4));
}

template <class L>
float vec_dot_plain(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename L::Elem*>(w);
  const auto* y = static_cast<const typename L::Elem*>(act);
  F32x8 acc[4];
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int c = 0; c < 4; ++c) fma8<L>(acc[c], x + i + 8 * c, y + i + 8 * c);
  for (; i + 8 <= n; i += 8) fma8<L>(acc[0], x + i, y + i);
  const float32x4_t lo = vaddq_f32(vaddq_f32(acc[0].lo, acc[1].lo), vaddq_f32(acc[2].lo, acc[3].lo));
  const float32x4_t hi = vaddq_f32(vaddq_f32(acc[0].hi, acc[1].hi), vaddq_f32(acc[2].hi, acc[3].hi));
  const float32x4_t s = vaddq_f32(lo, hi);
  float sum = (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
  for (; i < n; ++i) sum = std::fma(L::scalar(x[i]), L::scalar(y[i]), sum);
  return sum;
}

}  // namespace
}  // namespace neon

void fill_legacy_neon_tier(KernelTable& table, NeonTier tier) {
  if (tier == NeonTier::Dotprod) {
    neon::dotprod::fill(table);
  } else {
    neon::plain::fill(table);
  }
}

void fill_legacy_neon(KernelTable& table) {
  fill_legacy_neon_tier(table, cpu_features().neon_dotprod ? NeonTier::Dotprod : NeonTier::Plain);
  auto set = [&](GgmlType t, VecDotFn fn) {
    table[static_cast<uint32_t>(t)].vec_dot = fn;
    table[static_cast<uint32_t>(t)].vec_dot_type = t;
  };
  set(GgmlType::F32, &neon::vec_dot_plain<neon::F32Load>);
  set(GgmlType::F16, &neon::vec_dot_plain<neon::F16Load>);
  set(GgmlType::BF16, &neon::vec_dot_plain<neon::Bf16Load>);
}

}  // namespace sluice::kernels

#endif  // __aarch64__
