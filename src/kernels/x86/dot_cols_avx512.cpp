// AVX-512 VNNI multi-column dot products of Q4_K, Q5_K and Q6_K (the prefill
// hot path): one weight row against up to kMaxDotCols (8) activation rows.
//
// Why 512-bit: the 256-bit kernels are bound by the vector integer multiply
// ports (maddubs + vpdpwssd per 32 bytes per column, two per cycle). Sapphire
// Rapids-class cores issue 512-bit multiply-adds at the same two per cycle, so
// one zmm op does the work of two ymm ops. Each zmm holds two 32-byte runs of a
// super-block side by side (Q4_K: the low- and high-nibble run of a 64-element
// chunk, whose activations are 64 contiguous bytes; Q6_K: two consecutive
// 32-element runs), with each half multiplied by its own sub-block scale. The
// 32 EVEX registers hold 8 columns' accumulators at once.
//
// Contract (quant.h): out[j] is bit-identical to the vec_dot of this ISA
// (kquant_avx512.cpp), which runs the shared 256-bit loops
// (kquant_x86_dot_body.h) and is bit-identical to AVX2. Those loops form per
// super-block eight int32 lanes sumi[m] = sum over runs r of
// scale_r * (p_r[2m] + p_r[2m+1]) in two accumulators (even and odd runs) and
// add them; here the low 256 bits of the zmm accumulator collect exactly the
// runs one of those accumulators collects and the high 256 bits the others, so
// adding the two halves gives the same lanes (integer sums are exact). The
// float side (block scale products, FMA chains, reductions) is the same
// operation sequence per column. tests/unit/kernels_vnni_test.cpp checks it.
#include "kernels/kernel_table.h"

#if defined(__x86_64__)

// GCC 12 flags the deliberately undefined pass-through operand of its own
// avx512fintrin.h broadcasts/extracts/shuffles (_mm512_undefined_*) as
// (maybe) uninitialized once they are inlined here: a false positive. Set
// before immintrin.h is first included so it covers those lines.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels {
namespace cols_avx512 {
namespace {

using kq_x86::load256;

SLUICE_AVX512VNNI inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// 32 bytes at p in both 256-bit halves.
SLUICE_AVX512VNNI inline __m512i broadcast256(const void* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

// Shuffle control picking int16 scale `lo` (of the 8 in each 128-bit lane) for
// the low 256 bits and scale `hi` for the high 256 bits.
SLUICE_AVX512VNNI inline __m512i scale_pick(int lo, int hi) {
  const __m256i l = _mm256_set1_epi16(static_cast<short>(((2 * lo + 1) << 8) | (2 * lo)));
  const __m256i h = _mm256_set1_epi16(static_cast<short>(((2 * hi + 1) << 8) | (2 * hi)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);
}

// Shuffle control picking int16 scale first + q for 128-bit lane q (q = 0..3).
SLUICE_AVX512VNNI inline __m512i scale_pick4(int first) {
  auto ctl = [](int k) { return _mm_set1_epi16(static_cast<short>(((2 * k + 1) << 8) | (2 * k))); };
  const __m256i l = _mm256_set_m128i(ctl(first + 1), ctl(first));
  const __m256i h = _mm256_set_m128i(ctl(first + 3), ctl(first + 2));
  return _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);
}

// The eight int32 lanes of a 256-bit-loop accumulator pair: low half + high half.
SLUICE_AVX512VNNI inline __m256i fold_halves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

constexpr __mmask32 kHighWords = 0xFFFF0000u;  // the 16 int16 of the high 256 bits
constexpr __mmask32 kLowWords = 0x0000FFFFu;

// The float work per (column, block) costs about as much as the multiply-adds
// do, so the kernels below do it for two columns A, B at once: a zmm holds
// A's eight float accumulator lanes | B's, a ymm A's four min lanes | B's. Every
// lane sees the same float operations as in the one-column loop, so this only
// changes how many instructions carry them. Hence N (columns) is even; the
// dispatcher pads odd counts.

// [a x8 | b x8] from two floats in memory (broadcast loads).
SLUICE_AVX512VNNI inline __m512 pair_broadcast(const float* a, const float* b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm256_broadcast_ss(a))),
                                             _mm256_castps_pd(_mm256_broadcast_ss(b)), 1));
}

// [fold(a) | fold(b)]: the eight int32 lanes of each column's 256-bit-loop
// accumulator pair (low half + high half).
SLUICE_AVX512VNNI inline __m512i fold_pair(__m512i a, __m512i b) {
  return _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}

// out[0], out[1] from the paired accumulators: the reductions of
// dot_k4_style (hsum(acc) - the two-step sum of acc_min) for both columns at
// once. Each add has the same two operands as there (float addition is
// commutative, so which one comes first does not matter).
//
// acc_min holds each column's four min lanes twice over, [l0 l0 l1 l1 | l2 l2
// l3 l3] per 256-bit half (see the block loop), so the reduction reads lanes
// 0, 2, 4, 6 of each half.
SLUICE_AVX512VNNI inline void finish_pair(__m512 acc, __m512 acc_min, float* out) {
  // Per 256-bit half: lanes k + (k + 4) (hsum's 128-bit halves), then lanes
  // 0,1 + lanes 2,3 (movehl), then lane 0 + lane 1 (movehdup).
  __m512 s = _mm512_add_ps(acc, _mm512_shuffle_f32x4(acc, acc, _MM_SHUFFLE(2, 3, 0, 1)));
  s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(3, 2, 3, 2)));
  s = _mm512_add_ps(s, _mm512_movehdup_ps(s));
  // Per 256-bit half: l0 + l2 and l1 + l3 (lanes 0 and 2 after adding the
  // other 128-bit half), then (l0 + l2) + (l1 + l3).
  __m512 m = _mm512_add_ps(acc_min, _mm512_shuffle_f32x4(acc_min, acc_min, _MM_SHUFFLE(2, 3, 0, 1)));
  m = _mm512_add_ps(m, _mm512_permute_ps(m, _MM_SHUFFLE(3, 2, 3, 2)));
  out[0] = _mm512_cvtss_f32(s) - _mm512_cvtss_f32(m);
  out[1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(s, 2)) - _mm_cvtss_f32(_mm512_extractf32x4_ps(m, 2));
}

// Q4_K (kFiveBit = false) and Q5_K: mirrors dot_k4_style.
template <bool kFiveBit>
struct K4StyleCols {
  template <int N>
  SLUICE_AVX512VNNI static void run(int64_t n, const void* w, const void* const* act, float* out) {
    static_assert(N % 2 == 0, "columns come in pairs");
    constexpr int P = N / 2;
    const auto* first = static_cast<const uint8_t*>(w);
    const size_t block_bytes = kFiveBit ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
    const BlockQ8K* y[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i one = _mm512_set1_epi8(1);
    __m512 acc[P];      // columns 2p | 2p+1: dot_k4_style's acc
    __m512 acc_min[P];  // columns 2p | 2p+1: dot_k4_style's acc_min lanes, each twice
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      acc[p] = _mm512_setzero_ps();
      acc_min[p] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const kq_x86::K4Block blk = kq_x86::k4_block<kFiveBit>(first + i * static_cast<int64_t>(block_bytes));
      const uint8_t* qs = blk.qs;
      const __m512 wd = _mm512_set1_ps(blk.d);
      __m512 ypair[P];  // columns 2p | 2p+1: [y.d x8 | y.d x8]
      const __m512 wdmin = _mm512_set1_ps(blk.dmin);

      const __m256i scales_mins = blk.scales_mins;
      const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
      // Each min twice (m0 m0 m1 m1 .. m7 m7) in both 256-bit halves: against a
      // column's 16 bsums, int32 lane s of madd is m_s * (bsum 2s + bsum 2s+1).
      const __m512i mins_dup = _mm512_broadcast_i64x4(
          _mm256_set_m128i(_mm_unpackhi_epi16(mins, mins), _mm_unpacklo_epi16(mins, mins)));
      const __m512i sc = _mm512_broadcast_i32x4(_mm256_castsi256_si128(scales_mins));
      __m512i hbits = _mm512_setzero_si512();
      if constexpr (kFiveBit) hbits = broadcast256(blk.qh);

#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const BlockQ8K& ya = y[2 * p][i];
        const BlockQ8K& yb = y[2 * p + 1][i];
        // dot_k4_style's min lane k is m_2k S_2k + m_2k+1 S_2k+1 (S_s: the sum
        // of bsums 2s, 2s+1). madd gives m_s S_s in lane s; adding each lane's
        // neighbour puts lane k's integer in lanes 2k and 2k + 1, per column
        // half. Same integers, same float operations per lane, twice.
        const __m512i bs = _mm512_inserti64x4(_mm512_castsi256_si512(load256(ya.bsums)), load256(yb.bsums), 1);
        const __m512i ms = _mm512_madd_epi16(bs, mins_dup);
        const __m512i min_prod = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, _MM_PERM_CDAB));
        ypair[p] = pair_broadcast(&ya.d, &yb.d);
        acc_min[p] = _mm512_fmadd_ps(_mm512_mul_ps(ypair[p], wdmin), _mm512_cvtepi32_ps(min_prod), acc_min[p]);
      }
      __m512i sum[N];
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) sum[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        // Low half: the low nibbles (elements 64c..64c+31), high half: the high
        // nibbles (64c+32..64c+63), i.e. q_lo | q_hi of k4_chunk_quants.
        const __m512i bits = broadcast256(qs + 32 * c);
        __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(bits, kHighWords, bits, 4), m4);
        if constexpr (kFiveBit) {
          // Fifth bit: bit 2c of hbits for the low half, bit 2c + 1 for the high half.
          const __m512i h = _mm512_srli_epi16(hbits, 2 * c);
          const __m512i hb = _mm512_and_si512(_mm512_mask_srli_epi16(h, kHighWords, h, 1), one);
          q = _mm512_or_si512(q, _mm512_slli_epi16(hb, 4));
        }
        const __m512i s = _mm512_shuffle_epi8(sc, scale_pick(2 * c, 2 * c + 1));
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const __m512i p = _mm512_maddubs_epi16(q, load512(y[j][i].qs + 64 * c));
          sum[j] = _mm512_dpwssd_epi32(sum[j], s, p);
        }
      }
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const __m512 d = _mm512_mul_ps(ypair[p], wd);
        acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(fold_pair(sum[2 * p], sum[2 * p + 1])), acc[p]);
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) finish_pair(acc[p], acc_min[p], out + 2 * p);
  }
};

// Q6_K: mirrors dot_q6_k. Per 128-element half, zmm q01 = runs 0 | 1 and
// q23 = runs 2 | 3 (run k = elements 32k..32k+31 of the half, scales 2k, 2k+1).
struct Q6KCols {
  template <int N>
  SLUICE_AVX512VNNI static void run(int64_t n, const void* w, const void* const* act, float* out) {
    const auto* wb = static_cast<const BlockQ6K*>(w);
    const BlockQ8K* y[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m_b45 = _mm512_set1_epi8(0x30);
    __m256 acc[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const BlockQ6K& b = wb[i];
      const float wd = avx2::fp16_scalar(b.d);
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      __m512i sum[N];
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) sum[j] = _mm512_setzero_si512();
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_srli_si128(scales8, 8)));
        const __m512i s01 = _mm512_shuffle_epi8(sc, scale_pick4(0));
        const __m512i s23 = _mm512_shuffle_epi8(sc, scale_pick4(4));
        const __m512i ql = load512(b.ql + 64 * half);  // ql0 | ql1
        const __m512i qh = broadcast256(b.qh + 32 * half);
        // Bits 4-5 of the 6-bit quants: qh bits 0-1 (run 0), 2-3 (run 1), 4-5 (run 2), 6-7 (run 3).
        const __m512i h01 = _mm512_and_si512(_mm512_mask_slli_epi16(_mm512_slli_epi16(qh, 2), kLowWords, qh, 4), m_b45);
        const __m512i h23 = _mm512_and_si512(_mm512_mask_srli_epi16(qh, kHighWords, qh, 2), m_b45);
        const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m4), h01);
        const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h23);
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          const int8_t* q8 = y[j][i].qs + 128 * half;
          sum[j] = _mm512_dpwssd_epi32(sum[j], s01, _mm512_maddubs_epi16(q01, load512(q8)));
          sum[j] = _mm512_dpwssd_epi32(sum[j], s23, _mm512_maddubs_epi16(q23, load512(q8 + 64)));
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        // q in 0..63 means q - 32: take 32 * scale * bsum out per sub-block.
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(y[j][i].bsums)), 5);
        const float d = y[j][i].d * wd;
        const __m256i sumi = _mm256_sub_epi32(fold_halves(sum[j]), offset);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[j]);
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) out[j] = avx2::hsum(acc[j]);
  }
};

// Calls Kernel::template run<N>(n, w, act, out) for n_act (1..kMaxDotCols)
// columns. The kernels take columns in pairs: an odd count repeats the last
// column and drops that extra result (each column's value does not depend on
// the others).
template <class Kernel>
SLUICE_AVX512VNNI void dispatch_cols(int64_t n, const void* w, const void* const* act, int n_act, float* out) {
  static_assert(kMaxDotCols == 8, "dispatch_cols covers 1..8 columns");
  if (n_act % 2 != 0) {
    const void* padded[kMaxDotCols + 1];
    float padded_out[kMaxDotCols + 1];
    for (int j = 0; j < n_act; ++j) padded[j] = act[j];
    padded[n_act] = act[n_act - 1];
    dispatch_cols<Kernel>(n, w, padded, n_act + 1, padded_out);
    for (int j = 0; j < n_act; ++j) out[j] = padded_out[j];
    return;
  }
  switch (n_act) {
    case 2: Kernel::template run<2>(n, w, act, out); break;
    case 4: Kernel::template run<4>(n, w, act, out); break;
    case 6: Kernel::template run<6>(n, w, act, out); break;
    default: Kernel::template run<8>(n, w, act, out); break;
  }
}

}  // namespace

}  // namespace cols_avx512

void fill_dot_cols_avx512(KernelTable& table) {
  using namespace cols_avx512;
  auto set = [&](GgmlType t, VecDotColsFn fn) { table[static_cast<uint32_t>(t)].vec_dot_cols = fn; };
  set(GgmlType::Q4_K, &dispatch_cols<K4StyleCols<false>>);
  set(GgmlType::Q5_K, &dispatch_cols<K4StyleCols<true>>);
  set(GgmlType::Q6_K, &dispatch_cols<Q6KCols>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
