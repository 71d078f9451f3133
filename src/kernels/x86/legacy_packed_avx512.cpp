// AVX-512 VNNI packed (row-interleaved) layout of the symmetric legacy
// formats Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4: pack_rows and packed_dot (quant.h).
//
// Why: the per-row kernel (legacy_x86_dot_body.h) spends ~15 vector ops per
// 32-element block on unpacking, sign transfer, one 8-lane multiply-add and
// one 8-lane FMA, so decode is bound by instructions, not memory. Here one zmm
// lane is one weight row: a single vpdpbusd multiplies 4 consecutive weights
// of each of 16 rows with the same 4 activation bytes (an embedded
// broadcast), and one FMA applies 16 rows' block scales at once.
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
// Bit-identity with vec_dot (legacy_x86_dot_body.h's dot_symmetric, which
// this ISA's vec_dot and the AVX2 one share): per row and block the kernel
// forms the same eight exact int32 lanes, converts them to float, and
// accumulates acc[parity][lane] = fma(scale, p, acc) with parity = block & 1
// (even blocks into acc0, odd into acc1; an odd count's last block is even)
// and scale = row scale * fp16(y.d) in float; then the sum of acc0 + acc1 in
// hsum's order: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)). Each is done
// on 16 rows at once, one row per lane, so the float operations per row are
// those of vec_dot. The lanes: vpdpbusd needs an unsigned operand, so the
// weights enter as u = level + kBias in [0, 255] (Q4_0's nibble itself, Q5_0's
// five bits, or the int8 level XOR 0x80), and the accumulator starts at
// -kBias * (sum of the lane's four activation bytes), which makes the lane
// exactly sum(level * a). Like dot_i8 this assumes activations without -128 (the
// quantizers never write it, legacy_impl.h); with -128 the per-row kernel's
// sign transfer is itself inexact and the two would differ.
// tests/unit/kernels_packed_test.cpp checks the bit-identity.
#include "kernels/kernel_table.h"
#include "kernels/legacy_impl.h"

#if defined(__x86_64__)

// GCC 12 flags the deliberately undefined pass-through operand of its own
// avx512fintrin.h intrinsics as (maybe) uninitialized once inlined: a false
// positive (as in dot_cols_avx512.cpp). Set before immintrin.h is included.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

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
// block), kBias (u = level + kBias), quant_word(block, k) (the 4 bytes of
// chunk k as stored), high_word(block) (its high-region word, if any),
// scales(p) (16 row scales as floats) and unsigned_levels(high, q, u) (the 8
// lanes' u vectors of one block).

// 4-bit formats: the stored bytes are the block's qs, unchanged.
template <class B>
inline uint32_t nibble_word(const B& b, int k) {
  uint32_t w;
  std::memcpy(&w, b.qs + 4 * k, 4);
  return w;
}

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
  static uint32_t quant_word(const Block& b, int k) { return nibble_word(b, k); }
  static uint32_t high_word(const Block&) { return 0; }
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) { return fp16_scales(p); }
  // Nibble q is level q - 8: u = q.
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t*, const uint8_t* q, __m512i u[kLanes]) { split_nibbles(q, u); }
};

struct Q8_0Format {
  using Block = BlockQ8_0;
  static constexpr int kScaleBytes = 2, kHighBytes = 0, kChunks = 8, kBias = 128;
  static uint32_t quant_word(const Block& b, int k) {
    uint32_t w;
    std::memcpy(&w, b.qs + 4 * k, 4);
    return w ^ 0x80808080u;  // int8 level -> level + 128, stored so the kernel loads u directly
  }
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
  static uint32_t quant_word(const Block& b, int k) { return nibble_word(b, k); }
  static uint32_t high_word(const Block&) { return 0; }
  SLUICE_AVX512VNNI static __m512 scales(const uint8_t* p) { return fp16_scales(p); }
  SLUICE_AVX512VNNI static void unsigned_levels(const uint8_t*, const uint8_t* q, __m512i u[kLanes]) {
    table_levels<kIq4nlValues>(q, u);
  }
};

struct Mxfp4Format {
  using Block = BlockMxfp4;
  static constexpr int kScaleBytes = 1, kHighBytes = 0, kChunks = 4, kBias = 128;
  static uint32_t quant_word(const Block& b, int k) { return nibble_word(b, k); }
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
  static uint32_t quant_word(const Block& b, int k) { return nibble_word(b, k); }
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

template <class F>
void pack_rows(int64_t n, const void* src, void* dst) {
  using Block = typename F::Block;
  const int64_t nb = n / kLegacyBlock;
  const auto* rows = static_cast<const Block*>(src);
  auto* scales = static_cast<uint8_t*>(dst);
  uint8_t* high = scales + nb * kPackRows * F::kScaleBytes;
  uint8_t* quants = high + nb * kPackRows * F::kHighBytes;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* q = quants + b * F::kChunks * 64;
    for (int r = 0; r < kPackRows; ++r) {
      const Block& blk = rows[r * nb + b];
      // The scale field is every format's first member (d, or MXFP4's e).
      std::memcpy(scales + (b * kPackRows + r) * F::kScaleBytes, &blk, F::kScaleBytes);
      if constexpr (F::kHighBytes > 0) {
        const uint32_t h = F::high_word(blk);
        std::memcpy(high + (b * kPackRows + r) * F::kHighBytes, &h, F::kHighBytes);
      }
      for (int k = 0; k < F::kChunks; ++k) {
        const uint32_t w = F::quant_word(blk, k);
        std::memcpy(q + 64 * k + 4 * r, &w, 4);
      }
    }
  }
}

// ---- packed_dot ----

// One block (index b) of the group against N columns, into the accumulators
// of parity P. s16: the 16 row scales; u: the block's unsigned levels.
template <class F, int N, int P>
SLUICE_AVX512VNNI inline void block_cols(const __m512 s16, const __m512i u[kLanes], const BlockQ8_0* const* y,
                                         int64_t b, __m512 (*acc)[2][kLanes]) {
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) {
    const BlockQ8_0& yb = y[c][b];
    const __m512 s = _mm512_mul_ps(s16, _mm512_set1_ps(avx2::fp16_scalar(yb.d)));
    // -kBias * (sum of each lane's four activation bytes), eight lanes at once.
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yb.qs));
    const __m256i bias = _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                             _mm256_set1_epi8(static_cast<char>(F::kBias)), a);
    alignas(32) int32_t start[kLanes];
    _mm256_store_si256(reinterpret_cast<__m256i*>(start), _mm256_sub_epi32(_mm256_setzero_si256(), bias));
#pragma GCC unroll 8
    for (int j = 0; j < kLanes; ++j) {
      int32_t a4;
      std::memcpy(&a4, yb.qs + 4 * j, 4);
      const __m512i lane = _mm512_dpbusd_epi32(_mm512_set1_epi32(start[j]), u[j], _mm512_set1_epi32(a4));
      acc[c][P][j] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(lane), acc[c][P][j]);
    }
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

// prefetcht0 as volatile asm: GCC 12 silently dropped every _mm_prefetch /
// __builtin_prefetch of some instantiations below (all of Q5_0's, and all of
// them in an earlier version of this code; objdump showed none), and the
// prefetches are what makes the DRAM-resident GEMV run at speed.
inline void prefetch_line(const uint8_t* p) { asm volatile("prefetcht0 %0" : : "m"(*p)); }

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

template <class F, int N>
SLUICE_AVX512VNNI void packed_cols(int64_t n, const void* packed, const void* const* act, float* out,
                                   int64_t out_stride) {
  const int64_t nb = n / kLegacyBlock;
  const Regions<F> g(packed, nb);
  const Regions<F> next(g.quants_of(nb), nb);  // the group after this one
  constexpr int64_t kBlocksAhead = 2 * (kPrefetchBytes / (F::kChunks * 64) / 2);  // even: pairs stay aligned
  const BlockQ8_0* y[N];
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) y[c] = static_cast<const BlockQ8_0*>(act[c]);
  __m512 acc[N][2][kLanes];
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c)
#pragma GCC unroll 8
    for (int j = 0; j < kLanes; ++j) acc[c][0][j] = acc[c][1][j] = _mm512_setzero_ps();
  __m512i u[kLanes];
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    if (b + kBlocksAhead < nb) {
      prefetch_blocks(g, b + kBlocksAhead);
    } else {
      prefetch_blocks(next, b + kBlocksAhead - nb);
    }
    F::unsigned_levels(g.high_of(b), g.quants_of(b), u);
    block_cols<F, N, 0>(F::scales(g.scales_of(b)), u, y, b, acc);
    F::unsigned_levels(g.high_of(b + 1), g.quants_of(b + 1), u);
    block_cols<F, N, 1>(F::scales(g.scales_of(b + 1)), u, y, b + 1, acc);
  }
  if (b < nb) {
    F::unsigned_levels(g.high_of(b), g.quants_of(b), u);
    block_cols<F, N, 0>(F::scales(g.scales_of(b)), u, y, b, acc);
  }
  // avx2::hsum(acc0 + acc1) per row: ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
#pragma GCC unroll 8
  for (int c = 0; c < N; ++c) {
    __m512 v[kLanes];
#pragma GCC unroll 8
    for (int j = 0; j < kLanes; ++j) v[j] = _mm512_add_ps(acc[c][0][j], acc[c][1][j]);
    const __m512 s0 = _mm512_add_ps(v[0], v[4]), s1 = _mm512_add_ps(v[1], v[5]);
    const __m512 s2 = _mm512_add_ps(v[2], v[6]), s3 = _mm512_add_ps(v[3], v[7]);
    _mm512_storeu_ps(out + c * out_stride, _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
  }
}

template <class F>
SLUICE_AVX512VNNI void packed_dot(int64_t n, const void* packed, const void* const* act, int n_act, float* out,
                                  int64_t out_stride) {
  static_assert(kMaxDotCols == 8, "packed_dot covers 1..8 columns");
  switch (n_act) {
    case 1: packed_cols<F, 1>(n, packed, act, out, out_stride); break;
    case 2: packed_cols<F, 2>(n, packed, act, out, out_stride); break;
    case 3: packed_cols<F, 3>(n, packed, act, out, out_stride); break;
    case 4: packed_cols<F, 4>(n, packed, act, out, out_stride); break;
    case 5: packed_cols<F, 5>(n, packed, act, out, out_stride); break;
    case 6: packed_cols<F, 6>(n, packed, act, out, out_stride); break;
    case 7: packed_cols<F, 7>(n, packed, act, out, out_stride); break;
    default: packed_cols<F, 8>(n, packed, act, out, out_stride); break;
  }
}

}  // namespace
}  // namespace legacy_packed

void fill_legacy_packed_avx512(KernelTable& table) {
  using namespace legacy_packed;
  auto set = [&](GgmlType t, PackRowsFn pack, PackedDotFn dot) {
    table[static_cast<uint32_t>(t)].pack_rows = pack;
    table[static_cast<uint32_t>(t)].packed_dot = dot;
  };
  set(GgmlType::Q4_0, &pack_rows<Q4_0Format>, &packed_dot<Q4_0Format>);
  set(GgmlType::Q5_0, &pack_rows<Q5_0Format>, &packed_dot<Q5_0Format>);
  set(GgmlType::Q8_0, &pack_rows<Q8_0Format>, &packed_dot<Q8_0Format>);
  set(GgmlType::IQ4_NL, &pack_rows<Iq4NlFormat>, &packed_dot<Iq4NlFormat>);
  set(GgmlType::MXFP4, &pack_rows<Mxfp4Format>, &packed_dot<Mxfp4Format>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
