// AVX2 + F16C dequantizers and activation quantizers of the legacy formats,
// and the AVX2 fill function. Every function here is bit-identical to its
// scalar counterpart (same float operations per element; no FMA contraction
// is possible since no output involves a multiply followed by an add).
#if defined(__x86_64__)

#include <algorithm>
#include <utility>

#include "kernels/x86/legacy_avx2_common.h"
#include "kernels/legacy_impl.h"

namespace sluice::kernels {

namespace avx2 {
namespace {

template <class W>
SLUICE_AVX2 void dequantize_symmetric(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const typename W::Block*>(src);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    store_scaled(W::levels(x[i]), W::scale(x[i]), dst + i * kLegacyBlock);
  }
}

SLUICE_AVX2 void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(x[i]);
}

SLUICE_AVX2 void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(x[i]);
}

SLUICE_AVX2 void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(src[i]);
}

// Round to nearest even on the upper 16 bits; NaN keeps its top bits and
// is made quiet (as fp32_to_bf16).
SLUICE_AVX2 void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i lsb = _mm256_set1_epi32(1);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), lsb);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, odd)), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
    // 8 x u32 (< 2^16) -> 8 x u16: packus works per 128-bit lane, then gather
    // the two low qwords.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) y[i] = fp32_to_bf16(src[i]);
}

// One Q8 block: writes the 32 levels, returns d (unrounded) and the level sum.
SLUICE_AVX2 float quantize_q8_block(const float* x, int8_t* qs, int* level_sum) {
  __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
  __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
  m = _mm256_max_ps(m, _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float d = amax / 127.0f;
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), kRound));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), kRound));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), kRound));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), kRound));
  *level_sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
  // int32 -> int16 -> int8 with saturation; the packs interleave 128-bit
  // lanes, the final permute restores element order.
  const __m256i w01 = _mm256_packs_epi32(i0, i1);
  const __m256i w23 = _mm256_packs_epi32(i2, i3);
  const __m256i b = _mm256_packs_epi16(w01, w23);
  const __m256i ordered = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), ordered);
  return d;
}

SLUICE_AVX2 void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  int level_sum;
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    y[i].d = fp32_to_fp16(quantize_q8_block(src + i * kLegacyBlock, y[i].qs, &level_sum));
  }
}

SLUICE_AVX2 void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  int level_sum;
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float d = quantize_q8_block(src + i * kLegacyBlock, y[i].qs, &level_sum);
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(level_sum));
  }
}

}  // namespace
}  // namespace avx2

void fill_legacy_avx2(KernelTable& table) {
  using namespace avx2;
  fill_legacy_avx2_dot(table);
  auto deq = [&](GgmlType t, DequantizeFn fn) { table[static_cast<uint32_t>(t)].dequantize = fn; };
  deq(GgmlType::F16, &dequantize_f16);
  deq(GgmlType::BF16, &dequantize_bf16);
  deq(GgmlType::Q4_0, &dequantize_symmetric<Q4_0Levels>);
  deq(GgmlType::Q5_0, &dequantize_symmetric<Q5_0Levels>);
  deq(GgmlType::Q8_0, &dequantize_symmetric<Q8_0Levels>);
  deq(GgmlType::IQ4_NL, &dequantize_symmetric<Iq4NlLevels>);
  deq(GgmlType::MXFP4, &dequantize_symmetric<Mxfp4Levels>);
  auto quant = [&](GgmlType t, QuantizeFn fn) { table[static_cast<uint32_t>(t)].quantize = fn; };
  quant(GgmlType::F16, &quantize_f16);
  quant(GgmlType::BF16, &quantize_bf16);
  quant(GgmlType::Q8_0, &quantize_q8_0);
  quant(GgmlType::Q8_1, &quantize_q8_1);

  // Entries are partial, but their vec_dot_type must still be right for
  // callers that use kernels_for(t, Isa::Avx2) directly.
  const std::pair<GgmlType, GgmlType> dot_types[] = {
      {GgmlType::F32, GgmlType::F32},     {GgmlType::F16, GgmlType::F16},    {GgmlType::BF16, GgmlType::BF16},
      {GgmlType::Q4_0, GgmlType::Q8_0},   {GgmlType::Q4_1, GgmlType::Q8_1},  {GgmlType::Q5_0, GgmlType::Q8_0},
      {GgmlType::Q5_1, GgmlType::Q8_1},   {GgmlType::Q8_0, GgmlType::Q8_0},  {GgmlType::Q8_1, GgmlType::Q8_1},
      {GgmlType::IQ4_NL, GgmlType::Q8_0}, {GgmlType::MXFP4, GgmlType::Q8_0},
  };
  for (const auto& [t, dot] : dot_types) table[static_cast<uint32_t>(t)].vec_dot_type = dot;
}

}  // namespace sluice::kernels

#endif  // __x86_64__
