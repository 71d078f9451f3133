// AVX-VNNI K-quant dot products with Q8_K activations: Q4_K, Q5_K, Q6_K.
//
// Contract: each function returns exactly (bit for bit) what its AVX2
// counterpart in kquant_avx2.cpp returns, for every input: both run the same
// block loops (kquant_x86_dot_body.h), and the only difference, the
// madd-by-scales + add becoming one vpdpwssd (int32 += int16 * int16 pairs),
// produces the very same int32 lanes (integer sums are exact).
//
// Why not vpdpbusd (4 u8 x s8 products per lane) here: the per-sub-block
// scales would then have to be applied to int32 lanes afterwards, which costs
// as many multiply-port operations as maddubs does. The symmetric legacy
// formats, whose madd is by ones, do use vpdpbusd (legacy_vnni_dot.cpp).
#include "kernels/kquant_kernels.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels::kquant {
namespace {

SLUICE_AVXVNNI inline __m256i madd_acc(__m256i acc, __m256i s, __m256i p) {
  return _mm256_dpwssd_avx_epi32(acc, s, p);
}

#define SLUICE_KQUANT_DOT_TARGET SLUICE_AVXVNNI
#include "kernels/x86/kquant_x86_dot_body.h"  // dot_k4_style, dot_q6_k over madd_acc
#undef SLUICE_KQUANT_DOT_TARGET

}  // namespace

SLUICE_AVXVNNI float vec_dot_q4_k_vnni(int64_t n, const void* w, const void* a) {
  return dot_k4_style<false>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ4K), static_cast<const BlockQ8K*>(a));
}

SLUICE_AVXVNNI float vec_dot_q5_k_vnni(int64_t n, const void* w, const void* a) {
  return dot_k4_style<true>(n, static_cast<const uint8_t*>(w), sizeof(BlockQ5K), static_cast<const BlockQ8K*>(a));
}

SLUICE_AVXVNNI float vec_dot_q6_k_vnni(int64_t n, const void* w, const void* a) { return dot_q6_k(n, w, a); }

}  // namespace sluice::kernels::kquant

#endif  // __x86_64__
