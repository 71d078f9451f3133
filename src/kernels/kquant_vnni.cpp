// AVX-VNNI K-quant dot products with Q8_K activations: Q4_K, Q5_K, Q6_K.
//
// Contract: each function returns exactly (bit for bit) what its AVX2
// counterpart in kquant_avx2.cpp returns, for every input. The AVX2 kernels
// compute, per super-block, eight int32 lanes
//   sumi[m] = sum over 32-byte runs r of scale_r * (p_r[2m] + p_r[2m+1])
// with p_r = maddubs(quants, activations) (int16 pairs, never saturating for
// these ranges) and then do all float work on those lanes. Here the
// madd-by-scales + add becomes one vpdpwssd (int32 += int16 * int16 pairs),
// which produces the very same lane values: integer sums are exact, so
// grouping them into two accumulators (to halve the dependency chain) changes
// nothing. The float side (block scale products, FMA order, reductions) is
// copied operation for operation.
//
// Why not vpdpbusd (4 u8 x s8 products per lane) here: the per-sub-block
// scales would then have to be applied to int32 lanes afterwards, which costs
// as many multiply-port operations as maddubs does. The symmetric legacy
// formats, whose madd is by ones, do use vpdpbusd (legacy_vnni_dot.cpp).
#include "kernels/kquant_kernels.h"

#if defined(__x86_64__)

#include "kernels/kquant_x86_common.h"

namespace sluice::kernels::kquant {
namespace {

using avx2::fp16_scalar;
using avx2::hsum;
using kq_x86::broadcast_scale;
using kq_x86::load256;
using kq_x86::pair_scales;

// Mirrors vec_dot_k4_style (kquant_avx2.cpp).
template <bool kFiveBit>
SLUICE_AVXVNNI inline float vec_dot_k4_style_vnni(int64_t n, const uint8_t* first_block,
                                                  size_t block_bytes, const BlockQ8K* ab) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* blk = first_block + i * static_cast<int64_t>(block_bytes);
    const BlockQ8K& y = ab[i];
    uint16_t dh, dminh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&dminh, blk + 2, 2);
    const uint8_t* packed = blk + 4;
    const uint8_t* qh = blk + 4 + kKScaleBytes;  // Q5_K only
    const uint8_t* qs = kFiveBit ? qh + kQK_K / 8 : blk + 4 + kKScaleBytes;
    const float d = y.d * fp16_scalar(dh);
    const float dmin = y.d * fp16_scalar(dminh);

    const __m256i scales_mins = _mm256_cvtepu8_epi16(kq_x86::unpack_k4_scales(packed));
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m256i bsums = load256(y.bsums);
    const __m128i sub_sums =
        _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    const __m128i min_prod = _mm_madd_epi16(mins, sub_sums);
    acc_min = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(min_prod), acc_min);

    const __m128i sc_lane = _mm256_castsi256_si128(scales_mins);
    const __m256i sc = _mm256_set_m128i(sc_lane, sc_lane);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFiveBit) hbits = load256(qh);
    __m256i sum_lo = _mm256_setzero_si256(), sum_hi = _mm256_setzero_si256();
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
      sum_lo = _mm256_dpwssd_avx_epi32(sum_lo, broadcast_scale(sc, 2 * c), p_lo);
      sum_hi = _mm256_dpwssd_avx_epi32(sum_hi, broadcast_scale(sc, 2 * c + 1), p_hi);
    }
    const __m256i sumi = _mm256_add_epi32(sum_lo, sum_hi);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  acc_min = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  acc_min = _mm_add_ss(acc_min, _mm_movehdup_ps(acc_min));
  return hsum(acc) - _mm_cvtss_f32(acc_min);
}

}  // namespace

SLUICE_AVXVNNI float vec_dot_q4_k_vnni(int64_t n, const void* w, const void* a) {
  return vec_dot_k4_style_vnni<false>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ4K),
                                      static_cast<const BlockQ8K*>(a));
}

SLUICE_AVXVNNI float vec_dot_q5_k_vnni(int64_t n, const void* w, const void* a) {
  return vec_dot_k4_style_vnni<true>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ5K),
                                     static_cast<const BlockQ8K*>(a));
}

// Mirrors vec_dot_q6_k_avx2.
SLUICE_AVXVNNI float vec_dot_q6_k_vnni(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ6K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ6K& b = wb[i];
    const BlockQ8K& y = ab[i];
    const float d = y.d * fp16_scalar(b.d);

    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    // Quants are stored as q in 0..63 meaning q - 32: take 32 * scale * bsum out per sub-block.
    const __m256i offset =
        _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), load256(y.bsums)), 5);
    __m256i sum_a = _mm256_setzero_si256(), sum_b = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m128i lane = _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_srli_si128(scales8, 8));
      const __m256i sc = _mm256_set_m128i(lane, lane);
      __m256i q[4];
      kq_x86::q6k_half_quants(b, half, q);
      const int8_t* q8 = y.qs + 128 * half;
      sum_a = _mm256_dpwssd_avx_epi32(sum_a, pair_scales(sc, 0),
                                      _mm256_maddubs_epi16(q[0], load256(q8)));
      sum_b = _mm256_dpwssd_avx_epi32(sum_b, pair_scales(sc, 1),
                                      _mm256_maddubs_epi16(q[1], load256(q8 + 32)));
      sum_a = _mm256_dpwssd_avx_epi32(sum_a, pair_scales(sc, 2),
                                      _mm256_maddubs_epi16(q[2], load256(q8 + 64)));
      sum_b = _mm256_dpwssd_avx_epi32(sum_b, pair_scales(sc, 3),
                                      _mm256_maddubs_epi16(q[3], load256(q8 + 96)));
    }
    const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(sum_a, sum_b), offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return hsum(acc);
}

}  // namespace sluice::kernels::kquant

#endif  // __x86_64__
