// Helpers of every NEON Q4_K / Q5_K kernel (both NEON builds of
// arm/kquant_neon_body.h and the i8mm tier, arm/q4k_i8mm.cpp): armv8.0
// Advanced SIMD only, so they inline into any build.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace sluice::kernels {

// The block's fp16 d (lane 0) and dmin (lane 1), given as the four bytes at p.
// The conversion is exact.
inline float32x2_t block_d_dmin(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  return vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u32(vdup_n_u32(bits))));
}

// Q4_K / Q5_K packed 6-bit scales and mins (blocks_kquant.h unpack_k4_scales)
// -> 16 bytes: the 8 scales, then the 8 mins. Reads 16 bytes at packed (the
// 12 scale bytes and 4 bytes of what follows them in the block).
inline uint8x16_t unpack_k4_scales_mins(const uint8_t* packed) {
  // Low parts: scales 0-3 = b[0..3] & 63, 4-7 = b[8..11] & 15; mins 0-3 =
  // b[4..7] & 63, 4-7 = b[8..11] >> 4. High 2 bits of scales/mins 4-7: the
  // top bits of b[0..3] / b[4..7], moved to bits 4-5.
  static constexpr uint8_t kLowIdx[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11};
  static constexpr int8_t kLowShift[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -4, -4, -4, -4};
  static constexpr uint8_t kLowMask[16] = {63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15};
  static constexpr uint8_t kHighIdx[16] = {16, 16, 16, 16, 0, 1, 2, 3, 16, 16, 16, 16, 4, 5, 6, 7};
  const uint8x16_t b = vld1q_u8(packed);
  const uint8x16_t low =
      vandq_u8(vshlq_u8(vqtbl1q_u8(b, vld1q_u8(kLowIdx)), vld1q_s8(kLowShift)), vld1q_u8(kLowMask));
  const uint8x16_t high = vshlq_n_u8(vqtbl1q_u8(vshrq_n_u8(b, 6), vld1q_u8(kHighIdx)), 4);
  return vorrq_u8(low, high);
}

}  // namespace sluice::kernels

#endif  // __aarch64__
