// AVX-512 VNNI K-quant dot products (one weight row, one Q8_K activation row)
// of Q4_K, Q5_K and Q6_K: the shared 256-bit block loops
// (kquant_x86_dot_body.h) with the EVEX-encoded vpdpwssd, so CPUs with
// AVX-512 VNNI but no AVX-VNNI (Ice Lake, Cascade Lake) get the fused
// multiply-add too. They exist mainly so this ISA's multi-column dots
// (dot_cols_avx512.cpp) have a vec_dot of their own ISA to be bit-identical
// to; decode runs them at the speed of the AVX-VNNI ones (same instructions).
//
// Contract: bit-identical to the AVX2 (and AVX-VNNI) function of each type:
// same block loops, and vpdpwssd produces the same int32 lanes as
// add(acc, madd_epi16(s, p)).
#include "kernels/kquant_kernels.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels::kquant {
namespace {

SLUICE_AVX512VNNI inline __m256i madd_acc(__m256i acc, __m256i s, __m256i p) {
  return _mm256_dpwssd_epi32(acc, s, p);
}

#define SLUICE_KQUANT_DOT_TARGET SLUICE_AVX512VNNI
#include "kernels/x86/kquant_x86_dot_body.h"  // dot_k4_style, dot_q6_k over madd_acc
#undef SLUICE_KQUANT_DOT_TARGET

}  // namespace

SLUICE_AVX512VNNI float vec_dot_q4_k_avx512(int64_t n, const void* w, const void* a) {
  return dot_k4_style<false>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ4K), static_cast<const BlockQ8K*>(a));
}

SLUICE_AVX512VNNI float vec_dot_q5_k_avx512(int64_t n, const void* w, const void* a) {
  return dot_k4_style<true>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ5K), static_cast<const BlockQ8K*>(a));
}

SLUICE_AVX512VNNI float vec_dot_q6_k_avx512(int64_t n, const void* w, const void* a) { return dot_q6_k(n, w, a); }

}  // namespace sluice::kernels::kquant

#endif  // __x86_64__
