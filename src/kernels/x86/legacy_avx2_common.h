// Internal to the legacy AVX2 kernels: building blocks shared by the dot
// products, dequantizers and quantizers. Every function carries the target
// attribute, so the project needs no -mavx2 flag; callers must only run them
// after the registry has checked the CPU (Isa::Avx2 = AVX2 + FMA + F16C).
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks_legacy.h"
#include "kernels/tables.h"
#include "kernels/x86/target.h"
#include "util/fp16.h"


namespace sluice::kernels::avx2 {

SLUICE_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

SLUICE_AVX2 inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

SLUICE_AVX2 inline float fp16_scalar(uint16_t h) { return _cvtsh_ss(h); }

// 16 bytes of nibbles -> 32 bytes in [0, 15], in element order: byte j = low
// nibble of qs[j], byte j+16 = high nibble of qs[j].
SLUICE_AVX2 inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(packed, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
  return _mm256_set_m128i(hi, lo);
}

// The 32 bits of a Q5 qh word -> 32 bytes, 0xff where the element's bit is set.
SLUICE_AVX2 inline __m256i expand_bits(const uint8_t* qh) {
  uint32_t word;
  std::memcpy(&word, qh, sizeof(word));
  // Byte k of the result looks at byte k/8 of the word, then tests bit k%8.
  const __m256i select = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(word)), select);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

// 16-entry int8 table lookup of 32 indices in [0, 15].
SLUICE_AVX2 inline __m256i lookup16(const int8_t* table, __m256i idx) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
}

// Eight int32 sums of four products each, of signed bytes x and y. Exact when
// y holds no -128 (sign transfer: |x| * (y * sign(x)) through maddubs, whose
// pairwise int16 sums cannot saturate: 2 * 128 * 127 < 32767).
SLUICE_AVX2 inline __m256i dot_i8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

// Same for unsigned bytes u in [0, 31] and signed bytes y (any value).
SLUICE_AVX2 inline __m256i dot_u8_i8(__m256i u, __m256i y) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

// Stores 32 int8 levels as 32 floats times d (same rounding as the scalar
// float(q) * d: int8 -> float is exact, one multiply).
SLUICE_AVX2 inline void store_scaled(__m256i levels, float d, float* y) {
  const __m256 vd = _mm256_set1_ps(d);
  const __m128i lo = _mm256_castsi256_si128(levels);
  const __m128i hi = _mm256_extracti128_si256(levels, 1);
  _mm256_storeu_ps(y + 0, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), vd));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), vd));
  _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), vd));
  _mm256_storeu_ps(y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), vd));
}

// Signed int8 levels of the symmetric weight formats (x = scale * level).
struct Q4_0Levels {
  using Block = BlockQ4_0;
  SLUICE_AVX2 static __m256i levels(const Block& b) {
    return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8));
  }
  SLUICE_AVX2 static float scale(const Block& b) { return fp16_scalar(b.d); }
};
struct Q5_0Levels {
  using Block = BlockQ5_0;
  SLUICE_AVX2 static __m256i levels(const Block& b) {
    const __m256i high = _mm256_and_si256(expand_bits(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(b.qs), high), _mm256_set1_epi8(16));
  }
  SLUICE_AVX2 static float scale(const Block& b) { return fp16_scalar(b.d); }
};
struct Q8_0Levels {
  using Block = BlockQ8_0;
  SLUICE_AVX2 static __m256i levels(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  SLUICE_AVX2 static float scale(const Block& b) { return fp16_scalar(b.d); }
};
struct Iq4NlLevels {
  using Block = BlockIq4Nl;
  SLUICE_AVX2 static __m256i levels(const Block& b) { return lookup16(kIq4nlValues, unpack_nibbles(b.qs)); }
  SLUICE_AVX2 static float scale(const Block& b) { return fp16_scalar(b.d); }
};
struct Mxfp4Levels {
  using Block = BlockMxfp4;
  SLUICE_AVX2 static __m256i levels(const Block& b) { return lookup16(kMxfp4Values, unpack_nibbles(b.qs)); }
  SLUICE_AVX2 static float scale(const Block& b) { return e8m0_to_fp32_half(b.e); }
};

// Unsigned levels of the offset formats (x = scale * level + offset).
struct Q4_1Levels {
  using Block = BlockQ4_1;
  SLUICE_AVX2 static __m256i levels(const Block& b) { return unpack_nibbles(b.qs); }
  SLUICE_AVX2 static float scale(const Block& b) { return fp16_scalar(b.d); }
  SLUICE_AVX2 static float offset(const Block& b) { return fp16_scalar(b.m); }
};
struct Q5_1Levels {
  using Block = BlockQ5_1;
  SLUICE_AVX2 static __m256i levels(const Block& b) {
    const __m256i high = _mm256_and_si256(expand_bits(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(unpack_nibbles(b.qs), high);
  }
  SLUICE_AVX2 static float scale(const Block& b) { return fp16_scalar(b.d); }
  SLUICE_AVX2 static float offset(const Block& b) { return fp16_scalar(b.m); }
};

// Plain types (the vec_dot and multi-column dots): load converts 8 elements
// at p to floats, scalar one element (the tails).
struct F32Load {
  using Elem = float;
  SLUICE_AVX2 static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float scalar(float v) { return v; }
};
struct F16Load {
  using Elem = uint16_t;
  SLUICE_AVX2 static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  SLUICE_AVX2 static float scalar(uint16_t v) { return _cvtsh_ss(v); }
};
struct Bf16Load {
  using Elem = uint16_t;
  SLUICE_AVX2 static __m256 load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float scalar(uint16_t v) { return bf16_to_fp32(v); }
};

}  // namespace sluice::kernels::avx2

#endif  // __x86_64__
