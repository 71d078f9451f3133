// AVX-VNNI dot products of the legacy quantized formats (Q8_0-activation
// symmetric formats and Q8_1-activation offset formats).
//
// Contract: bit-identical to legacy_avx2_dot.cpp for every input. The AVX2
// kernels form eight int32 lanes per block as madd(maddubs(u, s), ones), i.e.
// each lane = the sum of four u8 x s8 products; vpdpbusd computes exactly that
// sum in one instruction (maddubs cannot saturate here: |u| <= 128 and
// |s| <= 128 give pairs within [-32768, 32512]). The sign transfer that makes
// the weight operand unsigned is the same as AVX2's, so lane values, and with
// them the float side, are identical: the block loops themselves are
// shared with AVX2 (legacy_x86_dot_body.h).
#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"
#include "kernels/legacy_impl.h"

namespace sluice::kernels {
namespace vnni {
namespace {

using avx2::fp16_scalar;
using avx2::hsum;

// Same lanes as avx2::dot_i8 (signed x signed through the sign transfer).
SLUICE_AVXVNNI inline __m256i dot_i8(__m256i x, __m256i y) {
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x),
                                 _mm256_sign_epi8(y, x));
}

// Same lanes as avx2::dot_u8_i8.
SLUICE_AVXVNNI inline __m256i dot_u8_i8(__m256i u, __m256i y) {
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, y);
}

#define SLUICE_LEGACY_DOT_TARGET SLUICE_AVXVNNI
#include "kernels/x86/legacy_x86_dot_body.h"  // the AVX2 block loops over the VNNI dot_i8 / dot_u8_i8
#undef SLUICE_LEGACY_DOT_TARGET

}  // namespace
}  // namespace vnni

void fill_legacy_vnni_dot(KernelTable& table) {
  using namespace avx2;
  // Entries are partial, but their vec_dot_type must still be right for
  // callers that use kernels_for(t, Isa::AvxVnni) directly.
  auto set = [&](GgmlType t, GgmlType dot_type, VecDotFn fn) {
    table[static_cast<uint32_t>(t)].vec_dot = fn;
    table[static_cast<uint32_t>(t)].vec_dot_type = dot_type;
  };
  set(GgmlType::Q4_0, GgmlType::Q8_0, &vnni::dot_symmetric<Q4_0Levels>);
  set(GgmlType::Q5_0, GgmlType::Q8_0, &vnni::dot_symmetric<Q5_0Levels>);
  set(GgmlType::Q8_0, GgmlType::Q8_0, &vnni::dot_symmetric<Q8_0Levels>);
  set(GgmlType::IQ4_NL, GgmlType::Q8_0, &vnni::dot_symmetric<Iq4NlLevels>);
  set(GgmlType::MXFP4, GgmlType::Q8_0, &vnni::dot_symmetric<Mxfp4Levels>);
  set(GgmlType::Q4_1, GgmlType::Q8_1, &vnni::dot_offset<Q4_1Levels>);
  set(GgmlType::Q5_1, GgmlType::Q8_1, &vnni::dot_offset<Q5_1Levels>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
