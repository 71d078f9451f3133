// AVX-512 VNNI packed (row-interleaved) kernels of Q4_K, Q5_K and Q6_K:
// TypeKernels::pack_rows / packed_dot (quant.h) for kPackRows = 16 rows.
//
// Layout (private to this file; pack_k4 and pack_q6k say it exactly): the 16
// rows' blocks of each super-block together, their 32-bit words transposed
// (word t of the 16 rows in one 64-byte line, row r at bytes 4r) and in the
// order the kernels read them, each fp16 field as 16 halves (one vcvtph2ps
// converts it for every row). So one zmm load gives a word of every row with
// row r in int32 lane r, and the kernels work "vertically": lane r computes
// exactly row r's vec_dot. Loads are 64-byte aligned when the group starts at
// 0 or 32 mod 64: GGUF data is only 32-byte aligned and the engine packs in
// place, so the layout has a variant for groups at 32 (at_32; pack_rows and
// packed_dot pick it from the address). Other addresses work, with split
// lines. kernels_bench medians, GB/s, group at 0 / at 32, 2-core shared VM:
//   before: Q4_K l2 1 col 79.5/60.5, 4 col 26.7/26.4; dram 31.4/30.3, 20.1/20.2
//           Q6_K l2 1 col 89.3/71.8, 4 col 37.1/35.4; dram 26.2/24.8, 21.5/21.0
//   after:  Q4_K l2 1 col 88.8/88.5, 4 col 26.8/24.8; dram 30.2/30.1, 20.5/19.5
//           Q6_K l2 1 col 95.3/87.7, 4 col 38.0/38.8; dram 25.4/25.8, 19.0/20.8
// (the legacy packed kernels lost under 10% at 32: not given a variant).
//
// Contract: out[j * out_stride + r] is bit-identical to this ISA's vec_dot
// (kquant_avx512.cpp = the shared 256-bit loops of kquant_x86_dot_body.h, and
// bit-identical to Avx2) of plain row r against act[j]. Those loops form per
// super-block eight int32 lanes
//   sumi[m] = sum over 32-element runs R of scale(R, m) * D(R, m),
// D(R, m) = sum of quant * activation over elements 4m..4m+3 of run R (what
// maddubs + madd by a broadcast scale put in lane m), then do
//   acc[m] = fma(y.d * d, float(sumi[m]), acc[m])   (8 lanes)
// (Q4_K/Q5_K also acc_min[k] = fma(y.d * dmin, float(mins term k), acc_min[k]),
// 4 lanes) and finally hsum(acc) = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), minus
// (l0+l2)+(l1+l3). Here word (chunk, m) of a row's quants holds the bytes of
// elements 4m..4m+3 of its runs, so maddubs against the 4 activation bytes
// broadcast, then vpdpwssd by the row's (scale, scale) int16 pair, gives
// D(R, m) * scale in each row's lane: the same integers (integer sums are
// exact in any order), then the same float operations per row, in the same
// order, on one zmm per (lane m, column). tests/unit/kernels_packed_kquant_test.cpp
// checks it bit for bit.
//
// Why: per 16 rows the block-scale, mins and float work is one vector op
// instead of 16 scalar-fed ones, and one activation broadcast feeds 16 rows,
// so the kernels are bound by the multiply ports (maddubs + vpdpwssd per 64
// products). kernels_bench, cache-resident: Q4_K one column ~3x the plain
// vec_dot's GMAC/s, 4-8 columns ~1.5x vec_dot_cols'.
//
// On AMX machines the Amx entry sets Q4_K's vec_dot (its own rounding), the
// registry then pairs Amx's (absent) packed functions with it: no packed Q4_K
// there, by design. Q5_K and Q6_K keep these.
#include "kernels/kernel_table.h"

#if defined(__x86_64__)

// GCC 12 false positives on the undefined pass-through operands of its own
// AVX-512 intrinsics (see dot_cols_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/blocks_kquant.h"
#include "kernels/x86/target.h"

namespace sluice::kernels {
namespace packed_avx512 {
namespace {

constexpr int kRows = kPackRows;
static_assert(kRows == 16, "one zmm int32/float lane per row");

// Plain row r of a group starts at src + r * row_bytes(n).
inline const uint8_t* plain_block(const void* src, int64_t n, size_t block_bytes, int r,
                                  int64_t i) {
  const size_t row_bytes = static_cast<size_t>(n / kQK_K) * block_bytes;
  return static_cast<const uint8_t*>(src) + r * row_bytes + static_cast<size_t>(i) * block_bytes;
}

// Whether the group at p gets the layout variant for groups at 32 mod 64 (what
// GGUF's 32-byte alignment gives in place), which puts the 64-byte words on
// 64-byte boundaries there. Any other address works with either variant (its
// words split cache lines either way); pack_rows and packed_dot see addresses
// equal mod 64 (quant.h), so they pick the same one.
inline bool at_32(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 63) == 32; }

// Q4_K / Q5_K group, per super-block (16 * block_bytes bytes, a multiple of
// 64, so every super-block of a group has the group's address mod 64): the 16
// rows' d (fp16, row order), their dmin, then 64-byte words; in the at_32
// variant d, the words, then dmin. Word t = 4 bytes of each row (row r at
// bytes 4r):
//   words 0..2        the 12 scale bytes (unpack_k4_scales' w[0..2])
//   Q5_K: 3..10       qh bytes 4m..4m+3, m = 0..7
//   kQsWord + 4m + c  qs bytes 32c + 4m..32c + 4m + 3 (chunk c, elements 4m..
//                     of sub-blocks 2c (low nibbles) and 2c + 1 (high))
// in the order the kernel reads them (m outer, c inner).
template <bool kFiveBit>
constexpr size_t k4_block_bytes = kFiveBit ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
template <bool kFiveBit>
constexpr int k4_qs_word = kFiveBit ? 11 : 3;
constexpr int kK4QhWord = 3;
static_assert(4 * kRows + (3 + 32) * 4 * kRows == kRows * sizeof(BlockQ4K));
static_assert(4 * kRows + (3 + 8 + 32) * 4 * kRows == kRows * sizeof(BlockQ5K));
static_assert(kRows * sizeof(BlockQ4K) % 64 == 0 && kRows * sizeof(BlockQ5K) % 64 == 0);

// Offsets in a super-block of the rows' dmin and of word 0 (d is at 0).
struct K4Offsets {
  size_t dmin, words;
};
template <bool kFiveBit>
inline K4Offsets k4_offsets(const void* group) {
  if (at_32(group)) return {kRows * k4_block_bytes<kFiveBit> - 2 * kRows, 2 * kRows};
  return {2 * kRows, 4 * kRows};
}

template <bool kFiveBit>
void pack_k4(int64_t n, const void* src, void* dst) {
  constexpr size_t bb = k4_block_bytes<kFiveBit>;
  constexpr size_t kQsOffset = 4 + kKScaleBytes + (kFiveBit ? kQK_K / 8 : 0);
  const K4Offsets at = k4_offsets<kFiveBit>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t* g = static_cast<uint8_t*>(dst) + static_cast<size_t>(i) * kRows * bb;
    uint8_t* words = g + at.words;
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* blk = plain_block(src, n, bb, r, i);
      std::memcpy(g + 2 * r, blk, 2);                 // d
      std::memcpy(g + at.dmin + 2 * r, blk + 2, 2);   // dmin
      for (int t = 0; t < k4_qs_word<kFiveBit>; ++t)  // scales (and qh)
        std::memcpy(words + t * 4 * kRows + 4 * r, blk + 4 + 4 * t, 4);
      for (int c = 0; c < 4; ++c)
        for (int m = 0; m < 8; ++m)
          std::memcpy(words + (k4_qs_word<kFiveBit> + 4 * m + c) * 4 * kRows + 4 * r,
                      blk + kQsOffset + 32 * c + 4 * m, 4);
    }
  }
}

// Q6_K group: first, per super-block, 52 64-byte words (word t = 4 bytes of
// each row, row r at bytes 4r; 3328 bytes, a multiple of 64, so the words of
// every super-block share the alignment of the first), then, per super-block,
// the 16 rows' d (fp16, row order); in the at_32 variant super-block 0's d
// (32 bytes) comes first instead, so the words start on a 64-byte boundary,
// and the others' d follow the words as before (q6k_halves). The words:
//   words 0..3               the int8 scales 4t..4t + 3
//   word 4 + 3(2m + h) + x   the quants of elements 4m..4m + 3 of the four
//                            32-element runs of half h, re-encoded (below)
// in the order the kernel reads them. The quants are re-encoded so a row's
// four 6-bit values of one element position decode in 9 vector ops instead of
// the 17 of ggml's ql/qh split (measured about 10% faster at one column, where
// decode is not shared). With q_k the 6-bit quant of element
// 128h + 32k + 4m + b of the block (run k), byte b of
//   x = 0: q_0 | (q_2 >> 4) << 6
//   x = 1: q_1 | (q_3 >> 4) << 6
//   x = 2: (q_2 & 15) | (q_3 & 15) << 4
constexpr int kQ6QuantWord = 4;
constexpr size_t kQ6WordsBytes = (kQ6QuantWord + 48) * 4 * kRows;
static_assert(kQ6WordsBytes + 2 * kRows == kRows * sizeof(BlockQ6K));

// Offset in a group of `blocks` super-blocks of super-block 0's words, and of
// super-block i's d.
inline size_t q6k_words(const void* group) { return at_32(group) ? 2 * kRows : 0; }
inline size_t q6k_halves(const void* group, int64_t blocks, int64_t i) {
  if (i == 0 && at_32(group)) return 0;
  return static_cast<size_t>(blocks) * kQ6WordsBytes + static_cast<size_t>(i) * 2 * kRows;
}

// The re-encoding above for one row's half h, 32 element positions l at
// once: bits (2j, 2j+1) of qh[l] are the high bits of run j's quant. Every
// shift is a 16-bit one whose bits from the neighbouring byte are masked off.
// Dword m of x's vector is the 4 bytes of word 4 + 3(2m + h) + x.
SLUICE_AVX512VNNI inline __m256i q6k_bits(__m256i v, int shift, int mask, int up) {  // ((v >> shift) & mask) << up
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(static_cast<char>(mask))), up);
}

SLUICE_AVX512VNNI inline void q6k_encode_half(const BlockQ6K& b, int h, uint8_t* words, int r) {
  const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
  const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
  const __m256i q0 = _mm256_or_si256(q6k_bits(ql0, 0, 15, 0), q6k_bits(qh, 0, 3, 4));
  const __m256i q1 = _mm256_or_si256(q6k_bits(ql1, 0, 15, 0), q6k_bits(qh, 2, 3, 4));
  const __m256i q2 = _mm256_or_si256(q6k_bits(ql0, 4, 15, 0), q6k_bits(qh, 4, 3, 4));
  const __m256i q3 = _mm256_or_si256(q6k_bits(ql1, 4, 15, 0), q6k_bits(qh, 6, 3, 4));
  alignas(32) uint32_t x[3][8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(x[0]), _mm256_or_si256(q0, q6k_bits(q2, 4, 3, 6)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(x[1]), _mm256_or_si256(q1, q6k_bits(q3, 4, 3, 6)));
  _mm256_store_si256(reinterpret_cast<__m256i*>(x[2]), _mm256_or_si256(q6k_bits(q2, 0, 15, 0), q6k_bits(q3, 0, 15, 4)));
  for (int m = 0; m < 8; ++m)
    for (int k = 0; k < 3; ++k)
      std::memcpy(words + (kQ6QuantWord + 3 * (2 * m + h) + k) * 4 * kRows + 4 * r, &x[k][m], 4);
}

SLUICE_AVX512VNNI void pack_q6k(int64_t n, const void* src, void* dst) {
  const int64_t blocks = n / kQK_K;
  uint8_t* const g = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* words = g + q6k_words(dst) + static_cast<size_t>(i) * kQ6WordsBytes;
    for (int r = 0; r < kRows; ++r) {
      BlockQ6K b;
      std::memcpy(&b, plain_block(src, n, sizeof(BlockQ6K), r, i), sizeof b);
      for (int t = 0; t < 4; ++t)
        std::memcpy(words + t * 4 * kRows + 4 * r,
                    reinterpret_cast<const uint8_t*>(b.scales) + 4 * t, 4);
      for (int h = 0; h < 2; ++h) q6k_encode_half(b, h, words, r);
      std::memcpy(g + q6k_halves(dst, blocks, i) + 2 * r, &b.d, 2);
    }
  }
}

SLUICE_AVX512VNNI inline __m512i word(const uint8_t* words, int t) {
  return _mm512_loadu_si512(words + 64 * t);
}

// Software prefetch of the super-block kPrefetchBlocks ahead (its `bytes`
// bytes at p). Without it the one-column kernels, which consume a super-block
// several times faster than the plain vec_dot, read DRAM-resident weights
// slower than it does (kernels_bench dram, Q4_K: 17 vs 24 GB/s); with it,
// faster (29-31 GB/s; Q6_K: level with it). Past the group's end it touches
// the next group, which callers read next (a prefetch never faults).
constexpr int64_t kPrefetchBlocks = 2;
SLUICE_AVX512VNNI inline void prefetch(const uint8_t* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

// The 4 activation bytes at p in every int32 lane.
SLUICE_AVX512VNNI inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// pshufb control: in each int32 lane (row), int16 0 = byte b0 of that lane,
// int16 1 = byte b1, zero-extended (hi = false) or in the high byte (hi =
// true, for a sign-extending arithmetic shift afterwards).
SLUICE_AVX512VNNI inline __m512i pick_pair(int b0, int b1, bool hi) {
  auto lane = [&](int i) {
    const uint32_t x0 = static_cast<uint32_t>(4 * i + b0), x1 = static_cast<uint32_t>(4 * i + b1);
    return static_cast<int>(hi ? (0x80u | x0 << 8 | 0x80u << 16 | x1 << 24)
                               : (x0 | 0x80u << 8 | x1 << 16 | 0x80u << 24));
  };
  return _mm512_set4_epi32(lane(3), lane(2), lane(1), lane(0));
}

// Per row: hsum(acc) as avx2::hsum adds (same operands of every add).
SLUICE_AVX512VNNI inline __m512 hsum8(const __m512* a) {
  const __m512 t0 = _mm512_add_ps(a[0], a[4]), t1 = _mm512_add_ps(a[1], a[5]);
  const __m512 t2 = _mm512_add_ps(a[2], a[6]), t3 = _mm512_add_ps(a[3], a[7]);
  return _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
}

// Q4_K (kFiveBit = false) and Q5_K, N columns: mirrors dot_k4_style.
template <bool kFiveBit, int N>
SLUICE_AVX512VNNI void k4_packed(int64_t n, const uint8_t* packed, const void* const* act,
                                 float* out, int64_t out_stride) {
  constexpr int kQsWord = k4_qs_word<kFiveBit>;
  const BlockQ8K* y[N];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi8(1);
  __m512 acc[N][8], acc_min[N][4];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) acc[j][m] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc_min[j][k] = _mm512_setzero_ps();
  }
  const K4Offsets at = k4_offsets<kFiveBit>(packed);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* g = packed + i * static_cast<int64_t>(kRows * k4_block_bytes<kFiveBit>);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
    const __m512 wdmin =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + at.dmin)));
    const uint8_t* words = g + at.words;
    prefetch(g + kPrefetchBlocks * kRows * k4_block_bytes<kFiveBit>,
             kRows * k4_block_bytes<kFiveBit>);
    // unpack_k4_scales on every row at once: bytes of lane r = row r's
    // scales 0..3 (s_lo), 4..7 (s_hi), mins 0..3 (m_lo), 4..7 (m_hi).
    const __m512i w0 = word(words, 0), w1 = word(words, 1), w2 = word(words, 2);
    const __m512i low6 = _mm512_set1_epi32(0x3f3f3f3f), low4 = _mm512_set1_epi32(0x0f0f0f0f),
                  low2 = _mm512_set1_epi32(0x03030303);
    const __m512i s_lo = _mm512_and_si512(w0, low6);
    const __m512i m_lo = _mm512_and_si512(w1, low6);
    const __m512i s_hi =
        _mm512_or_si512(_mm512_and_si512(w2, low4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), low2), 4));
    const __m512i m_hi =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), low4),
                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), low2), 4));
    // sc[s]: (scale s, scale s) as int16 in each row's lane.
    __m512i sc[8];
#pragma GCC unroll 8
    for (int s = 0; s < 4; ++s) {
      sc[s] = _mm512_shuffle_epi8(s_lo, pick_pair(s, s, false));
      sc[s + 4] = _mm512_shuffle_epi8(s_hi, pick_pair(s, s, false));
    }
    // mins k: (min 2k, min 2k+1) as int16 in each row's lane.
    const __m512i mins[4] = {_mm512_shuffle_epi8(m_lo, pick_pair(0, 1, false)),
                             _mm512_shuffle_epi8(m_lo, pick_pair(2, 3, false)),
                             _mm512_shuffle_epi8(m_hi, pick_pair(0, 1, false)),
                             _mm512_shuffle_epi8(m_hi, pick_pair(2, 3, false))};
    __m512 d[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      const BlockQ8K& yb = y[j][i];
      const __m512 yd = _mm512_set1_ps(yb.d);
      d[j] = _mm512_mul_ps(yd, wd);
      const __m512 dmin = _mm512_mul_ps(yd, wdmin);
      // dot_k4_style's min lane k: m_2k * S_2k + m_2k+1 * S_2k+1, S_s = the
      // sum of bsums 2s, 2s+1 (hadd), as one madd per row lane.
      const __m128i sub_sums =
          _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(yb.bsums)),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(yb.bsums + 8)));
      alignas(16) int32_t ss[4];
      _mm_store_si128(reinterpret_cast<__m128i*>(ss), sub_sums);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i prod = _mm512_madd_epi16(mins[k], _mm512_set1_epi32(ss[k]));
        acc_min[j][k] = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(prod), acc_min[j][k]);
      }
    }
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      __m512i sum[N];
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) sum[j] = _mm512_setzero_si512();
      __m512i hbits = _mm512_setzero_si512();
      if constexpr (kFiveBit) hbits = word(words, kK4QhWord + m);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        // Bytes 4m..4m+3 of chunk c of every row: low nibbles = elements
        // 4m.. of sub-block 2c, high nibbles = of sub-block 2c + 1.
        const __m512i bits = word(words, kQsWord + 4 * m + c);
        __m512i q_lo = _mm512_and_si512(bits, m4);
        __m512i q_hi = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4);
        if constexpr (kFiveBit) {
          const __m512i h_lo = _mm512_and_si512(_mm512_srli_epi16(hbits, 2 * c), one);
          const __m512i h_hi = _mm512_and_si512(_mm512_srli_epi16(hbits, 2 * c + 1), one);
          q_lo = _mm512_or_si512(q_lo, _mm512_slli_epi16(h_lo, 4));
          q_hi = _mm512_or_si512(q_hi, _mm512_slli_epi16(h_hi, 4));
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const int8_t* a = y[j][i].qs + 64 * c + 4 * m;
          sum[j] = _mm512_dpwssd_epi32(sum[j], sc[2 * c], _mm512_maddubs_epi16(q_lo, bcast4(a)));
          sum[j] = _mm512_dpwssd_epi32(sum[j], sc[2 * c + 1],
                                       _mm512_maddubs_epi16(q_hi, bcast4(a + 32)));
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j)
        acc[j][m] = _mm512_fmadd_ps(d[j], _mm512_cvtepi32_ps(sum[j]), acc[j][m]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
    const __m512 mn = _mm512_add_ps(_mm512_add_ps(acc_min[j][0], acc_min[j][2]),
                                    _mm512_add_ps(acc_min[j][1], acc_min[j][3]));
    _mm512_storeu_ps(out + j * out_stride, _mm512_sub_ps(hsum8(acc[j]), mn));
  }
}

// Q6_K, N columns: mirrors dot_q6_k (layout: pack_q6k).
template <int N>
SLUICE_AVX512VNNI void q6k_packed(int64_t n, const uint8_t* packed, const void* const* act,
                                  float* out, int64_t out_stride) {
  const BlockQ8K* y[N];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m6 = _mm512_set1_epi8(0x3F), m_b67 = _mm512_set1_epi8(static_cast<char>(0xC0));
  __m512 acc[N][8];
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j)
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) acc[j][m] = _mm512_setzero_ps();
  const int64_t blocks = n / kQK_K;
  const uint8_t* const words0 = packed + q6k_words(packed);
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* words = words0 + i * static_cast<int64_t>(kQ6WordsBytes);
    prefetch(words + kPrefetchBlocks * kQ6WordsBytes, kQ6WordsBytes);
    const uint8_t* halves = packed + q6k_halves(packed, blocks, i);
    const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves)));
    __m512i scw[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) scw[t] = word(words, t);
    __m512 d[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) d[j] = _mm512_mul_ps(_mm512_set1_ps(y[j][i].d), wd);
// Lanes 0..3 use the even sub-blocks of each run, lanes 4..7 the odd ones.
#pragma GCC unroll 2
    for (int odd = 0; odd < 2; ++odd) {
      // sc[s]: (scale 2s+odd, same) as int16 per row (sign-extended).
      __m512i sc[8];
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        const int sub = 2 * s + odd;
        sc[s] = _mm512_srai_epi16(
            _mm512_shuffle_epi8(scw[sub / 4], pick_pair(sub % 4, sub % 4, true)), 8);
      }
#pragma GCC unroll 8
      for (int m = 4 * odd; m < 4 * odd + 4; ++m) {
        // The q - 32 offset of lane m: -32 * (scale 2m * bsum 2m + scale 2m+1 * bsum 2m+1).
        const __m512i sc_pair =
            _mm512_shuffle_epi8(scw[m / 2], pick_pair(2 * m % 4, 2 * m % 4 + 1, true));
        const __m512i neg32 =
            _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_srai_epi16(sc_pair, 3));
        __m512i sum[N];
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          int32_t b;
          std::memcpy(&b, y[j][i].bsums + 2 * m, 4);
          sum[j] = _mm512_madd_epi16(neg32, _mm512_set1_epi32(b));
        }
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          const int q_word = kQ6QuantWord + 3 * (2 * m + half);
          const __m512i x0 = word(words, q_word);
          const __m512i x1 = word(words, q_word + 1);
          const __m512i lo = word(words, q_word + 2);
          // (a & b) | c: vpternlogd 0xEA. Masking bits 6-7 before the 16-bit
          // shift keeps the neighbouring byte's bits out.
          __m512i q[4];
          q[0] = _mm512_and_si512(x0, m6);
          q[1] = _mm512_and_si512(x1, m6);
          q[2] = _mm512_ternarylogic_epi32(lo, m4,
                                           _mm512_srli_epi16(_mm512_and_si512(x0, m_b67), 2), 0xEA);
          q[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(lo, 4), m4,
                                           _mm512_srli_epi16(_mm512_and_si512(x1, m_b67), 2), 0xEA);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            // Run k of this half: sub-blocks 8 half + 2k (lanes 0..3) and + 1 (4..7).
            const __m512i s = sc[4 * half + k];
#pragma GCC unroll 8
            for (int j = 0; j < N; ++j) {
              const int8_t* a = y[j][i].qs + 128 * half + 32 * k + 4 * m;
              sum[j] = _mm512_dpwssd_epi32(sum[j], s, _mm512_maddubs_epi16(q[k], bcast4(a)));
            }
          }
        }
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j)
          acc[j][m] = _mm512_fmadd_ps(d[j], _mm512_cvtepi32_ps(sum[j]), acc[j][m]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) _mm512_storeu_ps(out + j * out_stride, hsum8(acc[j]));
}

// K<N>::run(n, packed, act, out, out_stride) for n_act = N in 1..kMaxDotCols.
// (Splitting 8 columns into two passes of 4, which avoids spilling, measured
// no faster: the weights' decode is then done twice.)
template <template <int> class K>
SLUICE_AVX512VNNI void dispatch(int64_t n, const void* packed, const void* const* act, int n_act,
                                float* out, int64_t out_stride) {
  static_assert(kMaxDotCols == 8, "dispatch covers 1..8 columns");
  const auto* p = static_cast<const uint8_t*>(packed);
  switch (n_act) {
    case 1:
      K<1>::run(n, p, act, out, out_stride);
      break;
    case 2:
      K<2>::run(n, p, act, out, out_stride);
      break;
    case 3:
      K<3>::run(n, p, act, out, out_stride);
      break;
    case 4:
      K<4>::run(n, p, act, out, out_stride);
      break;
    case 5:
      K<5>::run(n, p, act, out, out_stride);
      break;
    case 6:
      K<6>::run(n, p, act, out, out_stride);
      break;
    case 7:
      K<7>::run(n, p, act, out, out_stride);
      break;
    default:
      K<8>::run(n, p, act, out, out_stride);
      break;
  }
}

template <int N>
struct Q4K {
  static constexpr auto run = k4_packed<false, N>;
};
template <int N>
struct Q5K {
  static constexpr auto run = k4_packed<true, N>;
};
template <int N>
struct Q6K {
  static constexpr auto run = q6k_packed<N>;
};

}  // namespace
}  // namespace packed_avx512

void fill_kquant_packed_avx512(KernelTable& table) {
  using namespace packed_avx512;
  auto set = [&](GgmlType t, PackRowsFn pack_fn, PackedDotFn dot_fn) {
    table[static_cast<uint32_t>(t)].pack_rows = pack_fn;
    table[static_cast<uint32_t>(t)].packed_dot = dot_fn;
  };
  set(GgmlType::Q4_K, &pack_k4<false>, &dispatch<Q4K>);
  set(GgmlType::Q5_K, &pack_k4<true>, &dispatch<Q5K>);
  set(GgmlType::Q6_K, &pack_q6k, &dispatch<Q6K>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
