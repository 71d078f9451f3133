// AVX2 conversion of F32 activations to Q8_K (the prefill and decode
// activation path of every K-quant matmul).
//
// Contract: bit-identical to quantize_q8_k (kquant_quantize.cpp, itself
// bit-exact with ggml's quantize_row_q8_K_ref) for every input, NaN and
// infinities included: the same float operations in the same precision
// (|x| maximum, -127 / max, x * iscale, the 1.5 * 2^23 rounding trick), the
// same first-index-wins choice of the signed maximum, the same int -> int8
// truncation and int16 block sums. tests/unit/kernels_kquant_test.cpp checks it.
#include "kernels/kquant_kernels.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels::kquant {
namespace {

// Eight ints -> their low bytes (what static_cast<int8_t> keeps), four
// vectors at a time, in element order.
SLUICE_AVX2 inline __m256i low_bytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i byte = _mm256_set1_epi32(0xFF);
  // packus never saturates on 0..255; it interleaves 128-bit lanes, undone by the permute.
  const __m256i ab = _mm256_packus_epi32(_mm256_and_si256(a, byte), _mm256_and_si256(b, byte));
  const __m256i cd = _mm256_packus_epi32(_mm256_and_si256(c, byte), _mm256_and_si256(d, byte));
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// nearest_int(v) of kquant_quantize.cpp, eight at a time, then min(127, .).
SLUICE_AVX2 inline __m256i round_clamp(__m256 v) {
  const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
  const __m256i i = _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                     _mm256_set1_epi32(0x00400000));
  return _mm256_min_epi32(i, _mm256_set1_epi32(127));
}

// The sixteen int16 sums of 16 quants of a block (qs: eight vectors of 32).
SLUICE_AVX2 inline __m256i block_sums(const __m256i q[8]) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i quarter[8];  // lanes 0-3: four-sums of group 2k, lanes 4-7: of group 2k + 1
  for (int k = 0; k < 8; ++k) quarter[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q[k]), ones16);
  // Lane 0 | lane 1 after two hadds: groups 0 2 4 6 | 1 3 5 7, and 8 .. 14 | 9 .. 15.
  const __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(quarter[0], quarter[1]),
                                       _mm256_hadd_epi32(quarter[2], quarter[3]));
  const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(quarter[4], quarter[5]),
                                       _mm256_hadd_epi32(quarter[6], quarter[7]));
  const __m256i packed = _mm256_packs_epi32(g0, g1);  // |sum| <= 16 * 128: no saturation
  const __m128i even = _mm256_castsi256_si128(packed), odd = _mm256_extracti128_si256(packed, 1);
  return _mm256_set_m128i(_mm_unpackhi_epi16(even, odd), _mm_unpacklo_epi16(even, odd));
}

}  // namespace

SLUICE_AVX2 void quantize_q8_k_avx2(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8K*>(dst);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ8K& y = blocks[b];
    // Largest |x|; max_ps returns its second operand when one is NaN, so NaNs
    // are skipped as the scalar `ax > amax` skips them.
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(src + j), abs_mask), m);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    if (amax == 0) {
      y.d = 0;
      std::memset(y.qs, 0, sizeof y.qs);
      std::memset(y.bsums, 0, sizeof y.bsums);
      continue;
    }
    // The signed value of the first element of largest magnitude.
    float max = 0;
    const __m256 target = _mm256_set1_ps(amax);
    for (int j = 0; j < kQK_K; j += 8) {
      const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(src + j), abs_mask), target, _CMP_EQ_OQ));
      if (hit) {
        max = src[j + __builtin_ctz(static_cast<unsigned>(hit))];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vscale = _mm256_set1_ps(iscale);
    __m256i q[8];
    for (int k = 0; k < 8; ++k) {
      const float* s = src + 32 * k;
      q[k] = low_bytes(round_clamp(_mm256_mul_ps(vscale, _mm256_loadu_ps(s))),
                       round_clamp(_mm256_mul_ps(vscale, _mm256_loadu_ps(s + 8))),
                       round_clamp(_mm256_mul_ps(vscale, _mm256_loadu_ps(s + 16))),
                       round_clamp(_mm256_mul_ps(vscale, _mm256_loadu_ps(s + 24))));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y.qs + 32 * k), q[k]);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y.bsums), block_sums(q));
    y.d = 1 / iscale;
  }
}

}  // namespace sluice::kernels::kquant

#endif  // __x86_64__
