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
#include "kernels/x86/kquant_x86_common.h"
#include "kernels/tables.h"

namespace sluice::kernels::kquant {
namespace {

// Shared with the AVX-VNNI kernels, so both reduce and convert identically.
using avx2::fp16_scalar;
using avx2::hsum;

// Shared with the AVX-VNNI kernels, so both decode blocks identically.
using kq_x86::load256;
using kq_x86::pair_scales;

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
    const float d = y.d * fp16_scalar(b.d);
    const float dmin = y.d * fp16_scalar(b.dmin);

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
  return hsum(acc) - hsum(acc_min);
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
    const float d = y.d * fp16_scalar(b.d);

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
  return hsum(acc);
}

// Q4_K, Q5_K, Q6_K: the block loops shared with the AVX-VNNI kernels
// (kquant_x86_dot_body.h), over the AVX2 integer multiply-add.
namespace {  // internal linkage: each ISA's file has its own copy of the loops

SLUICE_AVX2 inline __m256i madd_acc(__m256i acc, __m256i s, __m256i p) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(s, p));
}

#define SLUICE_KQUANT_DOT_TARGET SLUICE_AVX2
#include "kernels/x86/kquant_x86_dot_body.h"
#undef SLUICE_KQUANT_DOT_TARGET
}  // namespace

SLUICE_AVX2 float vec_dot_q4_k_avx2(int64_t n, const void* w, const void* a) {
  return dot_k4_style<false>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ4K),
                                     static_cast<const BlockQ8K*>(a));
}

SLUICE_AVX2 float vec_dot_q5_k_avx2(int64_t n, const void* w, const void* a) {
  return dot_k4_style<true>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ5K),
                                    static_cast<const BlockQ8K*>(a));
}

SLUICE_AVX2 float vec_dot_q6_k_avx2(int64_t n, const void* w, const void* a) { return dot_q6_k(n, w, a); }

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
    const float d = y.d * fp16_scalar(b.d);
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
  return hsum(acc);
}

}  // namespace sluice::kernels::kquant

#endif  // x86
