// AVX-512 VNNI packed (row-interleaved) layout of the symmetric legacy
// formats Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4: pack_rows and packed_dot (quant.h).
//
// Why: a per-row kernel spends ~15 vector ops per 32-element block on
// unpacking, sign transfer and the multiply-adds, so decode is bound by
// instructions, not memory. Here one zmm lane is one weight row: a single
// vpdpbusd multiplies 4 consecutive weights of each of 16 rows with the same 4
// activation bytes (an embedded broadcast), eight of them give 16 rows' block
// sums, and one FMA applies 16 rows' block scales at once.
//
// Layout of one group of kPackRows rows with nb blocks each (the same byte
// count as the 16 plain rows):
//   scales: nb x 16 row scales, block-major (fp16 d, or MXFP4's E8M0 byte),
//   high:   Q5_0 only: nb x 16 qh words, bits regrouped (Q5_0Format),
//   quants: nb x kChunks x 64 bytes; chunk k of block b holds bytes 4k..4k+3
//           of qs of row r at offset 4r (for Q8_0 each byte XOR 0x80).
// With 4-bit formats chunk k yields the block's int32 lanes k (low nibbles:
// elements 4k..4k+3) and k + 4 (high nibbles: elements 16+4k..16+4k+3), Q5_0
// adding each element's fifth bit from the high region; with Q8_0 chunk k is
// lane k. Those are exactly the lanes of dot_i8 in the per-row kernel.
//
// Bit-identity with vec_dot (legacy_avx512_dot.cpp, this set's block-sum
// rounding, quant.h): per row and block the kernel forms the block's exact
// integer sum S of its 32 level products and accumulates acc[parity] =
// fma(scale, float(S), acc) with parity = block & 1 (an odd count's last block
// is even) and scale = row scale * fp16(y.d) in float; then acc0 + acc1. Each
// is done on 16 rows at once, one row per lane, so the float operations per
// row are those of vec_dot. The integer part: vpdpbusd needs an unsigned
// operand, so the weights enter as u = level + kBias in [0, 255] (Q4_0's
// nibble itself, Q5_0's five bits, or the int8 level XOR 0x80), and the sum
// starts at -kBias * (sum of the block's 32 activation bytes), which makes it
// exactly sum(level * a). Like the per-row kernels' sign transfer this assumes
// activations without -128 (the quantizers never write it, legacy_impl.h);
// with -128 the per-row sign transfer is itself inexact and the two differ.
// tests/unit/kernels_packed_test.cpp checks the bit-identity.
#include "kernels/kernel_table.h"
#include "kernels/legacy_impl.h"

#if defined(__x86_64__)

// GCC 12 flags the deliberately undefined pass-through operand of its own
// avx512fintrin.h intrinsics as (maybe) uninitialized once inlined: a false
// positive (as in dot_cols_avx512.cpp). Set before immintrin.h is included.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstring>

#include "kernels/x86/legacy_avx2_common.h"

namespace sluice::kernels {
namespace legacy_packed {
namespace {

constexpr int kLanes = 8;  // int32 lanes per block, as in dot_i8

// ---- The formats: how pack_rows lays a block out, how packed_dot reads it ----
//
// Each format has Block, kScaleBytes (per row and block), kHighBytes (bytes
// of the high region per row and block), kChunks (64-byte quant chunks per
// block), kBias (u = level + kBias), kQuantFlip (XORed into each stored quant
// dword: 0, the qs bytes unchanged, or Q8_0's level + 128), high_word(block)
// (its high-region word, if any),
// scales(p) (16 row scales as floats) and unsigned_levels(high, q, u) (the 8
// lanes' u vectors of one block).

// Low nibbles of chunk k -> u[k], high nibbles -> u[k + 4].
SLUICE_AVX512VNNI inline void split_nibbles(const uint8_t* q, __m512i u[kLanes]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_loadu_si512(q + 64 * k);
    u[k] = _mm512_and_si512(v, m4);
    u[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// 16 fp16 scales -> floats (vcvtph2ps: exact, as avx2::fp16_scalar).
SLUICE_AVX512VNNI inline __m512 fp16_scales(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// A 16-entry int8 level table as u = level XOR 0x80 (= level + 128), in every
// 128-bit lane (vpshufb looks up within lanes).
SLUICE_AVX512VNNI inline __m512i unsigned_table(const int8_t* table) {
  const __m128i t = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)),
                                  _mm_set1_epi8(static_cast<char>(0x80)));
  return _mm512_broadcast_i32x4(t);
}

struct Q4_0Format {
  using Block = BlockQ4_0;
  static constexpr int kScaleBytes = 2, kHighBytes = 0, kChunks = 4, kBias = 8;
  static constexpr uint32_t kQuantFlip = 0;
  static uint32_t high_word(const Block&) { return 0; }
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) { return fp16_scales(p); }
  // Nibble q is level q - 8: u = q.
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t*, const uint8_t* q, __m512i u[kLanes]) { split_nibbles(q, u); }
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  static constexpr int kScaleBytes = 2, kHighBytes = 0, kChunks = 8, kBias = 128;
  static constexpr uint32_t kQuantFlip = 0x80808080u;  // int8 level -> level + 128: the kernel loads u directly
  static uint32_t high_word(const Block&) { return 0; }
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) { return fp16_scales(p); }
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t*, const uint8_t* q, __m512i u[kLanes]) {
#pragma GCC unroll 8
    for (int k = 0; k < kLanes; ++k) u[k] = _mm512_loadu_si512(q + 64 * k);
  }
};

// Nibble formats with a level table (IQ4_NL, MXFP4): u = table[nibble] + 128.
template <const int8_t (&kTable)[16]>
SLUICE_AVX512VNNI inline void table_levels(const uint8_t* q, __m512i u[kLanes]) {
  const __m512i t = unsigned_table(kTable);
  split_nibbles(q, u);
#pragma GCC unroll 8
  for (int k = 0; k < kLanes; ++k) u[k] = _mm512_shuffle_epi8(t, u[k]);
}

struct Iq4NlFormat {
  using Block = BlockIq4Nl;
  static constexpr int kScaleBytes = 2, kHighBytes = 0, kChunks = 4, kBias = 128;
  static constexpr uint32_t kQuantFlip = 0;
  static uint32_t high_word(const Block&) { return 0; }
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) { return fp16_scales(p); }
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t*, const uint8_t* q, __m512i u[kLanes]) {
    table_levels<kIq4nlValues>(q, u);
  }
};

struct Mxfp4Format {
  using Block = BlockMxfp4;
  static constexpr int kScaleBytes = 1, kHighBytes = 0, kChunks = 4, kBias = 128;
  static constexpr uint32_t kQuantFlip = 0;
  static uint32_t high_word(const Block&) { return 0; }
  // e8m0_to_fp32_half for 16 exponent bytes: 2^(e-128) as float bits,
  // (e - 1) << 23 for e >= 2, the subnormals 0x00200000 << e for e < 2.
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
  }
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t*, const uint8_t* q, __m512i u[kLanes]) {
    table_levels<kMxfp4Values>(q, u);
  }
};

// Q5_0: level = (nibble | fifth bit << 4) - 16, so u = nibble | fifth bit << 4.
// The fifth bits are stored regrouped by lane: bit k of byte i of the high
// word is element 4k + i's (qh bit 4k + i), so lane k's four bits are bit k
// of each byte, and one shift and mask put them at bit 4 of each byte.
struct Q5_0Format {
  using Block = BlockQ5_0;
  static constexpr int kScaleBytes = 2, kHighBytes = 4, kChunks = 4, kBias = 16;
  static constexpr uint32_t kQuantFlip = 0;
  static uint32_t high_word(const Block& b) {
    const uint32_t qh = load_qh(b.qh);
    uint32_t w = 0;
    for (int e = 0; e < kLegacyBlock; ++e) w |= ((qh >> e) & 1u) << (8 * (e % 4) + e / 4);
    return w;
  }
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) { return fp16_scales(p); }
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t* high, const uint8_t* q, __m512i u[kLanes]) {
    const __m512i h = _mm512_loadu_si512(high);
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    split_nibbles(q, u);
#pragma GCC unroll 8
    for (int k = 0; k < kLanes; ++k) {
      // Bit k of each byte to bit 4 (bits shifted in from a neighbouring byte
      // land outside bit 4 and are masked off).
      const __m512i at4 = k <= 4 ? _mm512_slli_epi32(h, 4 - k) : _mm512_srli_epi32(h, k - 4);
      u[k] = _mm512_ternarylogic_epi32(u[k], at4, bit4, 0xF8);  // u | (at4 & bit4)
    }
  }
};

// ---- pack_rows ----

// prefetcht0 as volatile asm: GCC 12 silently dropped every _mm_prefetch /
// __builtin_prefetch of some instantiations below (all of Q5_0's, and all of
// them in an earlier version of this code; objdump showed none), and the
// prefetches are what makes the DRAM-resident GEMV run at speed.
inline void prefetch_line(const uint8_t* p) { asm volatile("prefetcht0 %0" : : "m"(*p)); }

// The quant chunks of one block from 16 rows' 16 quant bytes each (row r's at
// qs[r]): chunk k = dword k of every row, in row order, i.e. a 16 x 4 dword
// transpose: four rows per zmm, then two-source dword permutes. XORs each
// dword with `flip` (Q8_0's sign flip; 0 otherwise). Why: the 4-byte copies
// it replaces held a re-lay to ~5 GB/s, and a streamed prompt's experts are
// re-laid on the read lanes, beside the GEMM on the same cores.
SLUICE_AVX512VNNI inline void transpose_quants(const uint8_t* const qs[kPackRows], uint32_t flip, uint8_t* q) {
  __m512i z[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[4 * g])));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[4 * g + 1])), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[4 * g + 2])), 2);
    z[g] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs[4 * g + 3])), 3);
  }
  const __m512i x = _mm512_set1_epi32(static_cast<int>(flip));
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    // Lanes 0-7: dword k of the first source's four rows, then the second's.
    const __m512i idx = _mm512_setr_epi32(k, 4 + k, 8 + k, 12 + k, 16 + k, 20 + k, 24 + k, 28 + k, 0, 0, 0, 0, 0, 0,
                                          0, 0);
    const __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]);  // rows 0-7
    const __m512i hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);  // rows 8-15
    const __m512i chunk = _mm512_inserti64x4(lo, _mm512_castsi512_si256(hi), 1);
    _mm512_storeu_si512(q + 64 * k, _mm512_xor_si512(chunk, x));
  }
}

template <class F>
SLUICE_AVX512VNNI void pack_rows(int64_t n, const void* src, void* dst) {
  using Block = typename F::Block;
  static_assert(F::kChunks % 4 == 0, "quant chunks come 16 bytes of a row at a time");
  const int64_t nb = n / kLegacyBlock;
  const auto* rows = static_cast<const Block*>(src);
  auto* scales = static_cast<uint8_t*>(dst);
  uint8_t* high = scales + nb * kPackRows * F::kScaleBytes;
  uint8_t* quants = high + nb * kPackRows * F::kHighBytes;
  // Rows are 16 streams a row apart, more than the hardware prefetcher
  // follows: each block hints the rows' bytes kPackAheadBlocks blocks on.
  constexpr int64_t kPackAheadBlocks = 8;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* q = quants + b * F::kChunks * 64;
    if (b + kPackAheadBlocks < nb) {
      for (int r = 0; r < kPackRows; ++r) prefetch_line(reinterpret_cast<const uint8_t*>(&rows[r * nb + b + kPackAheadBlocks]));
    }
    for (int r = 0; r < kPackRows; ++r) {
      const Block& blk = rows[r * nb + b];
      // The scale field is every format's first member (d, or MXFP4's e).
      std::memcpy(scales + (b * kPackRows + r) * F::kScaleBytes, &blk, F::kScaleBytes);
      if constexpr (F::kHighBytes > 0) {
        const uint32_t h = F::high_word(blk);
        std::memcpy(high + (b * kPackRows + r) * F::kHighBytes, &h, F::kHighBytes);
      }
    }
    // Chunks 4h..4h+3 are the rows' quant bytes 16h..16h+15.
    for (int h = 0; h < F::kChunks / 4; ++h) {
      const uint8_t* qs[kPackRows];
      for (int r = 0; r < kPackRows; ++r) qs[r] = reinterpret_cast<const uint8_t*>(rows[r * nb + b].qs) + 16 * h;
      transpose_quants(qs, F::kQuantFlip, q + 256 * h);
    }
  }
}

// ---- packed_dot ----

// Blocks whose activation sums one pass of packed_cols prepares (an even
// number, so block pairs never straddle two passes): N x kSpanBlocks int32 on
// the stack.
constexpr int64_t kSpanBlocks = 64;

// neg[k] = -kBias * (sum of the 32 activation bytes of block b0 + k), for
// k < count, exact: vpdpbusd with kBias bytes gives eight partial sums per
// block, and a tree of integer adds (8 blocks at a time) their totals.
SLUICE_AVX512VNNI inline __m256i bias_partial(__m256i bias, const BlockQ8_0& y) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs)));
}

template <class F>
SLUICE_AVX512VNNI inline void activation_bias(const BlockQ8_0* y, int64_t b0, int64_t count, int32_t* neg) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(F::kBias));
  auto partial = [&](int64_t b) SLUICE_AVX512VNNI { return bias_partial(bias, y[b]); };
  int64_t k = 0;
  for (; k + 8 <= count; k += 8) {
    const int64_t b = b0 + k;
    const __m256i h0 = _mm256_hadd_epi32(partial(b), partial(b + 1));
    const __m256i h1 = _mm256_hadd_epi32(partial(b + 2), partial(b + 3));
    const __m256i h2 = _mm256_hadd_epi32(partial(b + 4), partial(b + 5));
    const __m256i h3 = _mm256_hadd_epi32(partial(b + 6), partial(b + 7));
    const __m256i g0 = _mm256_hadd_epi32(h0, h1);  // blocks 0-3: low halves | high halves
    const __m256i g1 = _mm256_hadd_epi32(h2, h3);  // blocks 4-7
    const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(neg + k), _mm256_sub_epi32(_mm256_setzero_si256(), sum));
  }
  for (; k < count; ++k) neg[k] = -avx2::hsum_i32(partial(b0 + k));
}

// One block (index b) of the group against N columns, into the accumulators
// of parity P: per column the block's exact integer sum S (two chains of four
// vpdpbusd, the first started at the column's -kBias * sum(a)), then
// acc = fma(row scale * a.d, float(S), acc), 16 rows at once.
template <class F, int N, int P>
SLUICE_AVX512VNNI inline void block_cols(const __m512 s16, const __m512i u[kLanes], const BlockQ8_0* const* y,
                                         int64_t b, const int32_t* neg_bias, int64_t bias_stride,
                                         __m512 (*acc)[2]) {
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) {
    const BlockQ8_0& yb = y[c][b];
    const __m512 s = _mm512_mul_ps(s16, _mm512_set1_ps(avx2::fp16_scalar(yb.d)));
    int32_t a4[kLanes];
    std::memcpy(a4, yb.qs, sizeof(a4));
    __m512i lo = _mm512_set1_epi32(neg_bias[c * bias_stride]);
    __m512i hi = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < kLanes / 2; ++j) {
      lo = _mm512_dpbusd_epi32(lo, u[j], _mm512_set1_epi32(a4[j]));
      hi = _mm512_dpbusd_epi32(hi, u[j + kLanes / 2], _mm512_set1_epi32(a4[j + kLanes / 2]));
    }
    acc[c][P] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_add_epi32(lo, hi)), acc[c][P]);
  }
}

// The three regions of a packed group (see the top of the file).
template <class F>
struct Regions {
  const uint8_t* scales;
  const uint8_t* high;
  const uint8_t* quants;
  Regions(const void* packed, int64_t nb)
      : scales(static_cast<const uint8_t*>(packed)),
        high(scales + nb * kPackRows * F::kScaleBytes),
        quants(high + nb * kPackRows * F::kHighBytes) {}
  const uint8_t* scales_of(int64_t b) const { return scales + b * kPackRows * F::kScaleBytes; }
  const uint8_t* high_of(int64_t b) const { return high + b * kPackRows * F::kHighBytes; }
  const uint8_t* quants_of(int64_t b) const { return quants + b * F::kChunks * 64; }
};

// Software prefetch of the lines two blocks (one iteration of packed_cols)
// read, kPrefetchBytes of quants ahead of where it reads. Without it a
// one-column Q8_0 GEMV over DRAM-resident groups ran at 0.65x the per-row
// kernel's byte rate (bench/kernels_bench packed1 vs dot on a 2-core AMD EPYC
// VM), with 4-8 KiB ahead at 0.85-1.05x (noisy shared machine); why the
// hardware prefetcher falls short there was not investigated.
//
// Near the end of a group the prefetch continues at the same distance into
// the next group (callers read groups in address order and a prefetch never
// faults), so the first blocks of every group are in flight when it starts:
// with the next group's scales only reached by running off the end of the
// quants, 2 of every 18 KiB of a 2048-wide Q4_0 group were never hinted and
// model decode ran ~5% slower than with a whole-group hint from the caller.
constexpr int kPrefetchBytes = 6144;


// Hints blocks b and b + 1 of group g (b even).
template <class F>
SLUICE_AVX512VNNI inline void prefetch_blocks(const Regions<F>& g, int64_t b) {
  const uint8_t* q = g.quants_of(b);
#pragma GCC unroll 16
  for (int l = 0; l < 2 * F::kChunks; ++l) prefetch_line(q + 64 * l);
  prefetch_line(g.scales_of(b));
  if constexpr (F::kHighBytes > 0) {
    static_assert(kPackRows * F::kHighBytes == 64, "one line of high bits per block");
    prefetch_line(g.high_of(b));
    prefetch_line(g.high_of(b + 1));
  }
}

// prepared: the columns' -kBias * block sums for all nb blocks (column c at
// prepared + c * nb: prepare_packed), or null to form them here, a span of
// kSpanBlocks blocks at a time.
template <class F, int N>
SLUICE_AVX512VNNI void packed_cols(int64_t n, const void* packed, const void* const* act, const int32_t* prepared,
                                   float* out, int64_t out_stride) {
  const int64_t nb = n / kLegacyBlock;
  const Regions<F> g(packed, nb);
  const Regions<F> next(g.quants_of(nb), nb);  // the group after this one
  constexpr int64_t kBlocksAhead = 2 * (kPrefetchBytes / (F::kChunks * 64) / 2);  // even: pairs stay aligned
  const BlockQ8_0* y[N];
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) y[c] = static_cast<const BlockQ8_0*>(act[c]);
  __m512 acc[N][2];
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) acc[c][0] = acc[c][1] = _mm512_setzero_ps();
  alignas(32) int32_t span_bias[N * kSpanBlocks];
  __m512i u[kLanes];
  for (int64_t b0 = 0; b0 < nb; b0 += kSpanBlocks) {
    const int64_t b1 = std::min(nb, b0 + kSpanBlocks);
    // Block b's sums are at bias[c * stride + b - first].
    const int32_t* bias = prepared;
    int64_t stride = nb, first = 0;
    if (!prepared) {
#pragma GCC unroll 8
      for (int c = 0; c < N; ++c) activation_bias<F>(y[c], b0, b1 - b0, span_bias + c * kSpanBlocks);
      bias = span_bias;
      stride = kSpanBlocks;
      first = b0;
    }
    int64_t b = b0;
    for (; b + 1 < b1; b += 2) {
      if (b + kBlocksAhead < nb) {
        prefetch_blocks(g, b + kBlocksAhead);
      } else {
        prefetch_blocks(next, b + kBlocksAhead - nb);
      }
      F::unsigned_levels(g.high_of(b), g.quants_of(b), u);
      block_cols<F, N, 0>(F::scales(g.scales_of(b)), u, y, b, bias + (b - first), stride, acc);
      F::unsigned_levels(g.high_of(b + 1), g.quants_of(b + 1), u);
      block_cols<F, N, 1>(F::scales(g.scales_of(b + 1)), u, y, b + 1, bias + (b + 1 - first), stride, acc);
    }
    if (b < b1) {  // only in the last span, when nb is odd
      F::unsigned_levels(g.high_of(b), g.quants_of(b), u);
      block_cols<F, N, 0>(F::scales(g.scales_of(b)), u, y, b, bias + (b - first), stride, acc);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) _mm512_storeu_ps(out + c * out_stride, _mm512_add_ps(acc[c][0], acc[c][1]));
}

template <class F>
SLUICE_AVX512VNNI void packed_dot_prepared(int64_t n, const void* packed, const void* const* act,
                                           const int32_t* prepared, int n_act, float* out, int64_t out_stride) {
  static_assert(kMaxDotCols == 8, "packed_dot covers 1..8 columns");
  switch (n_act) {
    case 1: packed_cols<F, 1>(n, packed, act, prepared, out, out_stride); break;
    case 2: packed_cols<F, 2>(n, packed, act, prepared, out, out_stride); break;
    case 3: packed_cols<F, 3>(n, packed, act, prepared, out, out_stride); break;
    case 4: packed_cols<F, 4>(n, packed, act, prepared, out, out_stride); break;
    case 5: packed_cols<F, 5>(n, packed, act, prepared, out, out_stride); break;
    case 6: packed_cols<F, 6>(n, packed, act, prepared, out, out_stride); break;
    case 7: packed_cols<F, 7>(n, packed, act, prepared, out, out_stride); break;
    default: packed_cols<F, 8>(n, packed, act, prepared, out, out_stride); break;
  }
}

template <class F>
SLUICE_AVX512VNNI void packed_dot(int64_t n, const void* packed, const void* const* act, int n_act, float* out,
                                  int64_t out_stride) {
  packed_dot_prepared<F>(n, packed, act, nullptr, n_act, out, out_stride);
}

// The rows' -kBias * block sums, for packed_dot_prepared (quant.h).
template <class F>
SLUICE_AVX512VNNI void prepare_packed(int64_t n, const void* const* act, int n_act, int32_t* prepared) {
  const int64_t nb = n / kLegacyBlock;
  for (int j = 0; j < n_act; ++j) activation_bias<F>(static_cast<const BlockQ8_0*>(act[j]), 0, nb, prepared + j * nb);
}

}  // namespace
}  // namespace legacy_packed

void fill_legacy_packed_avx512(KernelTable& table) {
  using namespace legacy_packed;
  auto set = [&](GgmlType t, auto format) {
    using F = decltype(format);
    TypeKernels& k = table[static_cast<uint32_t>(t)];
    k.pack_rows = &pack_rows<F>;
    k.packed_dot = &packed_dot<F>;
    k.prepare_packed = &prepare_packed<F>;
    k.packed_dot_prepared = &packed_dot_prepared<F>;
  };
  set(GgmlType::Q4_0, Q4_0Format{});
  set(GgmlType::Q5_0, Q5_0Format{});
  set(GgmlType::Q8_0, Q8_0Format{});
  set(GgmlType::IQ4_NL, Iq4NlFormat{});
  set(GgmlType::MXFP4, Mxfp4Format{});
}

}  // namespace sluice::kernels

#endif  // __x86_64__
