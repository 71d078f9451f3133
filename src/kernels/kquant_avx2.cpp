// AVX2 K-quant dot products with Q8_K activations.
//
// Every function here is compiled for avx2+fma+f16c through a target
// attribute (no global compiler flags), so this file builds on any x86-64
// compiler setting; the registry only installs these when the CPU has all
// three features. On non-x86 targets the file compiles to nothing and
// kquant_kernels.cpp installs no AVX2 entries.
//
// Technique (as production engines do it): 8-bit unsigned weights times
// signed 8-bit activations with _mm256_maddubs_epi16 (pairs summed to int16,
// which never saturates for these ranges: at most 2*63*127), then
// _mm256_madd_epi16 against the sub-block scales (int16 -> int32). Per-block
// constant offsets (mins, the -4 of Q3_K, the -32 of Q6_K) are applied once per
// sub-block through the activation block sums (bsums), not per element.
// Integer sums are exact, so results differ from the scalar reference only by
// float summation order (a few ulp of the per-block terms).
#include "kernels/kquant_kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks_kquant.h"
#include "kernels/kquant_x86_common.h"
#include "kernels/tables.h"

#define SLUICE_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace sluice::kernels::kquant {
namespace {

SLUICE_AVX2 inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

SLUICE_AVX2 inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// Shared with the AVX-VNNI kernels, so both decode blocks identically.
using kq_x86::broadcast_scale;
using kq_x86::load256;
using kq_x86::pair_scales;
inline __m128i unpack_k4_scales_vec(const uint8_t* packed) { return kq_x86::unpack_k4_scales(packed); }

SLUICE_AVX2 inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }


// Q3_K packed scales -> 16 signed bytes (bias 32 removed), see unpack_q3k_scales.
SLUICE_AVX2 inline __m128i unpack_q3k_scales_vec(const uint8_t packed[kKScaleBytes]) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  constexpr uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t s0 = (w[0] & kLow4) | ((w[2] & kLow2) << 4);
  const uint32_t s1 = (w[1] & kLow4) | (((w[2] >> 2) & kLow2) << 4);
  const uint32_t s2 = ((w[0] >> 4) & kLow4) | (((w[2] >> 4) & kLow2) << 4);
  const uint32_t s3 = ((w[1] >> 4) & kLow4) | (((w[2] >> 6) & kLow2) << 4);
  const __m128i biased = _mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1),
                                       static_cast<int>(s0));
  return _mm_sub_epi8(biased, _mm_set1_epi8(32));
}

}  // namespace

SLUICE_AVX2 float vec_dot_q2_k_avx2(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ2K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ2K& b = wb[i];
    const BlockQ8K& y = ab[i];
    const float d = y.d * half_to_float(b.d);
    const float dmin = y.d * half_to_float(b.dmin);

    const __m128i packed = load128(b.scales);
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    const __m256i min_prod = _mm256_madd_epi16(mins16, load256(y.bsums));
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(min_prod), acc_min);

    const __m256i scales16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, m4));
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m128i lane = half == 0 ? _mm256_castsi256_si128(scales16) : _mm256_extracti128_si256(scales16, 1);
      const __m256i sc = _mm256_set_m128i(lane, lane);
      const __m256i q2bits = load256(b.qs + 32 * half);
      const int8_t* q8 = y.qs + 128 * half;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2bits, 2 * k), m3);
        const __m256i p = _mm256_maddubs_epi16(q, load256(q8 + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pair_scales(sc, k), p));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc) - hsum_ps(acc_min);
}

SLUICE_AVX2 float vec_dot_q3_k_avx2(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ3K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ3K& b = wb[i];
    const BlockQ8K& y = ab[i];
    const float d = y.d * half_to_float(b.d);

    const __m256i scales16 = _mm256_cvtepi8_epi16(unpack_q3k_scales_vec(b.scales));
    // Quants are stored as u = low2 + 4*hbit in 0..7 and mean u - 4: take the
    // -4 out once per sub-block via bsums.
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(y.bsums)), 2);
    const __m256i hbits = load256(b.hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m128i lane = half == 0 ? _mm256_castsi256_si128(scales16) : _mm256_extracti128_si256(scales16, 1);
      const __m256i sc = _mm256_set_m128i(lane, lane);
      const __m256i q3bits = load256(b.qs + 32 * half);
      const int8_t* q8 = y.qs + 128 * half;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q3bits, 2 * k), m3);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(hbits, 4 * half + k), one);
        const __m256i u = _mm256_or_si256(low, _mm256_slli_epi16(high, 2));
        const __m256i p = _mm256_maddubs_epi16(u, load256(q8 + 32 * k));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pair_scales(sc, k), p));
      }
    }
    sumi = _mm256_sub_epi32(sumi, offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

// Shared by Q4_K and Q5_K: everything except how the quant bytes are built
// (Q5_K ORs in a fifth bit from qh). Blocks are addressed as bytes because the
// two structs differ in size but share the d, dmin, scales prefix.
template <bool kFiveBit>
SLUICE_AVX2 inline float vec_dot_k4_style(int64_t n, const uint8_t* first_block, size_t block_bytes,
                                          const BlockQ8K* ab) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* blk = first_block + i * static_cast<int64_t>(block_bytes);
    const BlockQ8K& y = ab[i];
    // Q4_K and Q5_K start with the same d, dmin, scales[12] prefix.
    uint16_t dh, dminh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&dminh, blk + 2, 2);
    const uint8_t* packed = blk + 4;
    const uint8_t* qh = blk + 4 + kKScaleBytes;                      // Q5_K only
    const uint8_t* qs = kFiveBit ? qh + kQK_K / 8 : blk + 4 + kKScaleBytes;
    const float d = y.d * half_to_float(dh);
    const float dmin = y.d * half_to_float(dminh);

    const __m256i scales_mins = _mm256_cvtepu8_epi16(unpack_k4_scales_vec(packed));
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m256i bsums = load256(y.bsums);
    const __m128i sub_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    const __m128i min_prod = _mm_madd_epi16(mins, sub_sums);
    acc_min = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(min_prod), acc_min);

    const __m128i sc_lane = _mm256_castsi256_si128(scales_mins);
    const __m256i sc = _mm256_set_m128i(sc_lane, sc_lane);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFiveBit) hbits = load256(qh);
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = load256(qs + 32 * c);
      __m256i q_lo = _mm256_and_si256(bits, m4);
      __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      if constexpr (kFiveBit) {
        const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
        const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
        q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
        q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
      }
      const __m256i p_lo = _mm256_maddubs_epi16(q_lo, load256(y.qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(q_hi, load256(y.qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(broadcast_scale(sc, 2 * c), p_lo));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(broadcast_scale(sc, 2 * c + 1), p_hi));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  acc_min = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  acc_min = _mm_add_ss(acc_min, _mm_movehdup_ps(acc_min));
  return hsum_ps(acc) - _mm_cvtss_f32(acc_min);
}

SLUICE_AVX2 float vec_dot_q4_k_avx2(int64_t n, const void* w, const void* a) {
  return vec_dot_k4_style<false>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ4K), static_cast<const BlockQ8K*>(a));
}

SLUICE_AVX2 float vec_dot_q5_k_avx2(int64_t n, const void* w, const void* a) {
  return vec_dot_k4_style<true>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ5K), static_cast<const BlockQ8K*>(a));
}

SLUICE_AVX2 float vec_dot_q6_k_avx2(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ6K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m_b01 = _mm256_set1_epi8(0x03);
  const __m256i m_b23 = _mm256_set1_epi8(0x0C);
  const __m256i m_b45 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ6K& b = wb[i];
    const BlockQ8K& y = ab[i];
    const float d = y.d * half_to_float(b.d);

    const __m128i scales8 = load128(b.scales);
    // Quants are stored as q in 0..63 meaning q - 32: take 32 * scale * bsum out per sub-block.
    const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), load256(y.bsums)), 5);
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m128i lane = _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_srli_si128(scales8, 8));
      const __m256i sc = _mm256_set_m128i(lane, lane);
      const __m256i ql0 = load256(b.ql + 64 * half);
      const __m256i ql1 = load256(b.ql + 64 * half + 32);
      const __m256i qh = load256(b.qh + 32 * half);
      const int8_t* q8 = y.qs + 128 * half;
      const __m256i q0 = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m_b01), 4));
      const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m_b23), 2));
      const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m_b45));
      const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), m_b45));
      const __m256i p0 = _mm256_madd_epi16(pair_scales(sc, 0), _mm256_maddubs_epi16(q0, load256(q8)));
      const __m256i p1 = _mm256_madd_epi16(pair_scales(sc, 1), _mm256_maddubs_epi16(q1, load256(q8 + 32)));
      const __m256i p2 = _mm256_madd_epi16(pair_scales(sc, 2), _mm256_maddubs_epi16(q2, load256(q8 + 64)));
      const __m256i p3 = _mm256_madd_epi16(pair_scales(sc, 3), _mm256_maddubs_epi16(q3, load256(q8 + 96)));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
    }
    sumi = _mm256_sub_epi32(sumi, offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

SLUICE_AVX2 float vec_dot_iq4_xs_avx2(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockIq4Xs*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m128i levels = load128(kIq4nlValues);
  const __m256i table = _mm256_set_m128i(levels, levels);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIq4Xs& b = wb[i];
    const BlockQ8K& y = ab[i];
    const float d = y.d * half_to_float(b.d);
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int ib = 0; ib < 8; ib += 2) {  // two 32-element sub-blocks per iteration
      const __m256i bits = load256(b.qs + 16 * ib);
      const __m256i lo = _mm256_and_si256(bits, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      const __m256i wa = _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(lo, hi, 0x20));
      const __m256i wb2 = _mm256_shuffle_epi8(table, _mm256_permute2x128_si256(lo, hi, 0x31));
      const __m256i ya = load256(y.qs + 32 * ib);
      const __m256i yb = load256(y.qs + 32 * ib + 32);
      // signed x signed via maddubs: |w| times y with w's sign moved onto y.
      const __m256i pa = _mm256_maddubs_epi16(_mm256_sign_epi8(wa, wa), _mm256_sign_epi8(ya, wa));
      const __m256i pb = _mm256_maddubs_epi16(_mm256_sign_epi8(wb2, wb2), _mm256_sign_epi8(yb, wb2));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_set1_epi16(static_cast<short>(iq4xs_scale(b, ib))), pa));
      sumi = _mm256_add_epi32(sumi,
                              _mm256_madd_epi16(_mm256_set1_epi16(static_cast<short>(iq4xs_scale(b, ib + 1))), pb));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum_ps(acc);
}

}  // namespace sluice::kernels::kquant

#endif  // x86
