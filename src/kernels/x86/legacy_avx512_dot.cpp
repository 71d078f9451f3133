// AVX-512 VNNI dot products of the symmetric legacy formats (Q4_0, Q5_0, Q8_0,
// IQ4_NL, MXFP4 with Q8_0 activations): vec_dot and the multi-column
// vec_dot_cols, in this set's own rounding of them (the block-sum rounding,
// quant.h).
//
// Why they exist: the Avx512Vnni entry of these types also carries the packed
// layout (legacy_packed_avx512.cpp), and the registry takes pack_rows,
// packed_dot and vec_dot_cols from the ISA that sets vec_dot. The packed
// kernel keeps one row per zmm lane, so the cheapest exact thing it can do per
// block is one integer sum of the block's 32 products (a chain of vpdpbusd)
// followed by one float step; the AVX2 rounding (eight int32 lanes per block,
// each converted and accumulated in float) cost it two more vector ops per
// vpdpbusd. These per-row functions use the same rounding, so that a value
// never depends on the layout, the column count or the thread split (they
// are ~20% slower than the AVX2 rounding's per-row loop, which they replace
// only on this set: streamed experts a prompt uses fewer than 4 times and
// plain tails; what stays in memory is packed):
//   S_b = the exact sum of block b's 32 level products (int32),
//   s_b = scale(w_b) * fp16(a_b.d) (one float multiply),
//   acc[b % 2] = fma(s_b, float(S_b), acc[b % 2]) in block order from +0,
//   result = acc[0] + acc[1].
// float(S_b) is exact (|S_b| < 2^24), so only the fma and the final add round.
// Like the AVX2 kernels they use the sign-transfer trick, exact for activation
// bytes in [-127, 127] (the quantizers never write -128: legacy_impl.h).
// Built only from AVX-512 instructions: an AVX-512 VNNI CPU need not have
// AVX-VNNI (Ice Lake, Cascade Lake).
#include "kernels/kernel_table.h"
#include "kernels/legacy_impl.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels {
namespace legacy_avx512 {
namespace {

using avx2::fp16_scalar;

// Eight int32 lanes, each the sum of four s8 x s8 products (sign transfer).
SLUICE_AVX512VNNI inline __m256i dot_i8(__m256i x, __m256i y) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// Two blocks' eight partial sums -> [S0, S1, S0, S1]; integer adds, so exact
// in any order.
SLUICE_AVX512VNNI inline __m128i pair_sums(__m256i l0, __m256i l1) {
  const __m256i h = _mm256_hadd_epi32(l0, l1);
  const __m256i h2 = _mm256_hadd_epi32(h, h);
  return _mm_add_epi32(_mm256_castsi256_si128(h2), _mm256_extracti128_si256(h2, 1));
}

// One block's eight partial sums -> S, as a float in lane 0 (exact).
SLUICE_AVX512VNNI inline __m128 block_sum(__m256i l) { return _mm_set_ss(static_cast<float>(avx2::hsum_i32(l))); }

// acc with lane 0 (the even blocks' accumulator) from `step`, whose other
// lanes _mm_fmadd_ss took from its first operand.
SLUICE_AVX512VNNI inline __m128 even_only(__m128 acc, __m128 step) { return _mm_move_ss(acc, step); }

// acc lanes 0 and 1 are the even and odd blocks' accumulators (lanes 2 and 3
// get 0 * S and are ignored).
SLUICE_AVX512VNNI inline float finish(__m128 acc) {
  return _mm_cvtss_f32(acc) + _mm_cvtss_f32(_mm_shuffle_ps(acc, acc, 1));
}

template <class W>
SLUICE_AVX512VNNI float dot_blocksum(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename W::Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / kLegacyBlock;
  __m128 acc = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m256i l0 = dot_i8(W::levels(x[i]), kq_x86::load256(y[i].qs));
    const __m256i l1 = dot_i8(W::levels(x[i + 1]), kq_x86::load256(y[i + 1].qs));
    const __m128 s = _mm_setr_ps(W::scale(x[i]) * fp16_scalar(y[i].d), W::scale(x[i + 1]) * fp16_scalar(y[i + 1].d),
                                 0.0f, 0.0f);
    acc = _mm_fmadd_ps(s, _mm_cvtepi32_ps(pair_sums(l0, l1)), acc);
  }
  if (i < nb) {
    const __m256i l0 = dot_i8(W::levels(x[i]), kq_x86::load256(y[i].qs));
    acc = even_only(acc, _mm_fmadd_ss(_mm_set_ss(W::scale(x[i]) * fp16_scalar(y[i].d)), block_sum(l0), acc));
  }
  return finish(acc);
}

// The multi-column form: each weight block's |levels| once for all columns,
// the weight's signs moved onto each column (the sign-transfer trick split so
// the weight half is shared); per column the same steps as dot_blocksum.
template <class W>
struct BlocksumCols {
  template <int N>
  SLUICE_AVX512VNNI static void run(int64_t n, const void* w, const void* const* act, float* out) {
    const auto* x = static_cast<const typename W::Block*>(w);
    const BlockQ8_0* y[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8_0*>(act[j]);
    const int64_t nb = n / kLegacyBlock;
    __m128 acc[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) acc[j] = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      const __m256i lv0 = W::levels(x[i]), lv1 = W::levels(x[i + 1]);
      const __m256i ax0 = _mm256_sign_epi8(lv0, lv0), ax1 = _mm256_sign_epi8(lv1, lv1);
      const float d0 = W::scale(x[i]), d1 = W::scale(x[i + 1]);
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        const BlockQ8_0& a0 = y[j][i];
        const BlockQ8_0& a1 = y[j][i + 1];
        const __m256i l0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax0, _mm256_sign_epi8(kq_x86::load256(a0.qs), lv0));
        const __m256i l1 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax1, _mm256_sign_epi8(kq_x86::load256(a1.qs), lv1));
        const __m128 s = _mm_setr_ps(d0 * fp16_scalar(a0.d), d1 * fp16_scalar(a1.d), 0.0f, 0.0f);
        acc[j] = _mm_fmadd_ps(s, _mm_cvtepi32_ps(pair_sums(l0, l1)), acc[j]);
      }
    }
    if (i < nb) {
      const __m256i lv0 = W::levels(x[i]);
      const __m256i ax0 = _mm256_sign_epi8(lv0, lv0);
      const float d0 = W::scale(x[i]);
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) {
        const BlockQ8_0& a0 = y[j][i];
        const __m256i l0 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax0, _mm256_sign_epi8(kq_x86::load256(a0.qs), lv0));
        acc[j] = even_only(acc[j], _mm_fmadd_ss(_mm_set_ss(d0 * fp16_scalar(a0.d)), block_sum(l0), acc[j]));
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) out[j] = finish(acc[j]);
  }
};

// Calls Kernel::run<N> for n_act in 1..kMaxDotCols.
template <class Kernel>
SLUICE_AVX512VNNI void dispatch_blocksum_cols(int64_t n, const void* w, const void* const* act, int n_act,
                                              float* out) {
  static_assert(kMaxDotCols == 8, "the switch covers 1..8 columns");
  switch (n_act) {
    case 1: Kernel::template run<1>(n, w, act, out); break;
    case 2: Kernel::template run<2>(n, w, act, out); break;
    case 3: Kernel::template run<3>(n, w, act, out); break;
    case 4: Kernel::template run<4>(n, w, act, out); break;
    case 5: Kernel::template run<5>(n, w, act, out); break;
    case 6: Kernel::template run<6>(n, w, act, out); break;
    case 7: Kernel::template run<7>(n, w, act, out); break;
    default: Kernel::template run<8>(n, w, act, out); break;
  }
}

}  // namespace
}  // namespace legacy_avx512

void fill_legacy_avx512_dot(KernelTable& table) {
  using namespace avx2;
  using namespace legacy_avx512;
  // The entry is partial, but its vec_dot_type must still be right for callers
  // that use kernels_for(t, Isa::Avx512Vnni) directly.
  auto set = [&](GgmlType t, VecDotFn dot, VecDotColsFn cols) {
    TypeKernels& k = table[static_cast<uint32_t>(t)];
    k.vec_dot = dot;
    k.vec_dot_cols = cols;
    k.vec_dot_type = GgmlType::Q8_0;
  };
  set(GgmlType::Q4_0, &dot_blocksum<Q4_0Levels>, &dispatch_blocksum_cols<BlocksumCols<Q4_0Levels>>);
  set(GgmlType::Q5_0, &dot_blocksum<Q5_0Levels>, &dispatch_blocksum_cols<BlocksumCols<Q5_0Levels>>);
  set(GgmlType::Q8_0, &dot_blocksum<Q8_0Levels>, &dispatch_blocksum_cols<BlocksumCols<Q8_0Levels>>);
  set(GgmlType::IQ4_NL, &dot_blocksum<Iq4NlLevels>, &dispatch_blocksum_cols<BlocksumCols<Iq4NlLevels>>);
  set(GgmlType::MXFP4, &dot_blocksum<Mxfp4Levels>, &dispatch_blocksum_cols<BlocksumCols<Mxfp4Levels>>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
