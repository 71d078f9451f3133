// Internal to the x86 K-quant dot products (AVX2, AVX-VNNI, AVX-512 VNNI): the scale
// unpacking and shuffles both ISAs share, so the VNNI kernels decode blocks
// exactly as the AVX2 ones do. Every function carries the AVX2 target
// attribute (callable from AVX2 and AVX-VNNI functions alike); callers run them
// only after the registry has checked the CPU.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks_kquant.h"
#include "kernels/x86/legacy_avx2_common.h"


namespace sluice::kernels::kq_x86 {

SLUICE_AVX2 inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Q4_K/Q5_K packed 6-bit scales and mins -> 16 bytes: 8 scales then 8 mins.
inline __m128i unpack_k4_scales(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t scales_lo = w[0] & kLow6;
  const uint32_t scales_hi = (w[2] & kLow4) | (((w[0] >> 6) & kLow2) << 4);
  const uint32_t mins_lo = w[1] & kLow6;
  const uint32_t mins_hi = ((w[2] >> 4) & kLow4) | (((w[1] >> 6) & kLow2) << 4);
  return _mm_set_epi32(static_cast<int>(mins_hi), static_cast<int>(mins_lo),
                       static_cast<int>(scales_hi), static_cast<int>(scales_lo));
}

// int16 scale k of the 8 in each 128-bit lane, broadcast to all 16 positions.
SLUICE_AVX2 inline __m256i broadcast_scale(__m256i scales8, int k) {
  return _mm256_shuffle_epi8(scales8,
                             _mm256_set1_epi16(static_cast<short>(((2 * k + 1) << 8) | (2 * k))));
}

// Low lane: int16 scale 2k everywhere; high lane: scale 2k+1 (a 32-byte run of
// quants made of two 16-element sub-blocks).
SLUICE_AVX2 inline __m256i pair_scales(__m256i scales8, int k) {
  const short lo = static_cast<short>(((4 * k + 1) << 8) | (4 * k));
  const short hi = static_cast<short>(((4 * k + 3) << 8) | (4 * k + 2));
  return _mm256_shuffle_epi8(scales8, _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)));
}

// One Q4_K / Q5_K block decoded for the x86 kernels (the two formats share
// the d, dmin, scales[12] prefix; Q5_K has qh[32] before qs). Blocks are
// addressed as bytes because the two structs differ in size.
struct K4Block {
  float d = 0, dmin = 0;  // the block's fp16 scale and min scale
  __m256i scales_mins;    // 8 sub-block scales then 8 mins, as int16
  const uint8_t* qh;      // Q5_K's fifth bits (meaningless for Q4_K)
  const uint8_t* qs;      // the nibbles
};

template <bool kFiveBit>
SLUICE_AVX2 inline K4Block k4_block(const uint8_t* blk) {
  K4Block b;
  uint16_t dh, dminh;
  std::memcpy(&dh, blk, 2);
  std::memcpy(&dminh, blk + 2, 2);
  b.d = avx2::fp16_scalar(dh);
  b.dmin = avx2::fp16_scalar(dminh);
  b.scales_mins = _mm256_cvtepu8_epi16(unpack_k4_scales(blk + 4));
  b.qh = blk + 4 + kKScaleBytes;
  b.qs = kFiveBit ? b.qh + kQK_K / 8 : blk + 4 + kKScaleBytes;
  return b;
}

// Q4_K/Q5_K quants of the 32-byte chunk c (elements 64c..64c+63 of a super-
// block): q_lo = elements 64c..64c+31 (low nibbles), q_hi = 64c+32..64c+63
// (high nibbles), each in 0..15, or 0..31 with Q5_K's fifth bit from hbits.
template <bool kFiveBit>
SLUICE_AVX2 inline void k4_chunk_quants(const uint8_t* qs, __m256i hbits, int c, __m256i m4, __m256i one,
                                        __m256i& q_lo, __m256i& q_hi) {
  const __m256i bits = load256(qs + 32 * c);
  q_lo = _mm256_and_si256(bits, m4);
  q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
  if constexpr (kFiveBit) {
    const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
    const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
    q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
    q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
  }
}

// Q6_K quants of one 128-element half: q[k] holds elements 32k..32k+31 of the
// half as unsigned 6-bit values (0..63; they mean q - 32).
SLUICE_AVX2 inline void q6k_half_quants(const BlockQ6K& b, int half, __m256i q[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m_b01 = _mm256_set1_epi8(0x03);
  const __m256i m_b23 = _mm256_set1_epi8(0x0C);
  const __m256i m_b45 = _mm256_set1_epi8(0x30);
  const __m256i ql0 = load256(b.ql + 64 * half);
  const __m256i ql1 = load256(b.ql + 64 * half + 32);
  const __m256i qh = load256(b.qh + 32 * half);
  q[0] =
      _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m_b01), 4));
  q[1] =
      _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m_b23), 2));
  q[2] =
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m_b45));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m_b45));
}

}  // namespace sluice::kernels::kq_x86

#endif  // __x86_64__
