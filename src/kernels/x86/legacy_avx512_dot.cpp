// AVX-512 VNNI dot products of the symmetric legacy formats (Q4_0, Q5_0, Q8_0,
// IQ4_NL, MXFP4 with Q8_0 activations): vec_dot and the multi-column
// vec_dot_cols.
//
// Why they exist: the Avx512Vnni entry of these types also carries the packed
// layout (legacy_packed_avx512.cpp), and the registry takes pack_rows,
// packed_dot and vec_dot_cols from the ISA that sets vec_dot. So this ISA
// needs a vec_dot (and cols) of its own, built only from AVX-512 instructions:
// an AVX-512 VNNI CPU need not have AVX-VNNI (Ice Lake, Cascade Lake).
//
// Contract: bit-identical to the AVX2 function of each type for every input.
// The block loops are the shared AVX2 ones (legacy_x86_dot_body.h,
// dot_cols_x86_body.h); only the integer products change, to the EVEX-encoded
// 256-bit vpdpbusd, which forms the same int32 lanes as AVX2's
// madd(maddubs(u, s), ones) (legacy_vnni_dot.cpp explains why).
#include "kernels/kernel_table.h"
#include "kernels/legacy_impl.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels {
namespace legacy_avx512 {
namespace {

using avx2::fp16_scalar;
using avx2::hsum;

// Same lanes as avx2::dot_i8 (signed x signed through the sign transfer).
SLUICE_AVX512VNNI inline __m256i dot_i8(__m256i x, __m256i y) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

// Same lanes as avx2::dot_u8_i8.
SLUICE_AVX512VNNI inline __m256i dot_u8_i8(__m256i u, __m256i y) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, y);
}

// Same lanes as acc + madd_epi16(s, p) (the K-quant bodies of
// dot_cols_x86_body.h need it to compile; only SymmetricCols is used here).
SLUICE_AVX512VNNI inline __m256i madd_acc(__m256i acc, __m256i s, __m256i p) {
  return _mm256_dpwssd_epi32(acc, s, p);
}

#define SLUICE_LEGACY_DOT_TARGET SLUICE_AVX512VNNI
#include "kernels/x86/legacy_x86_dot_body.h"  // dot_symmetric (and dot_offset, unused)
#undef SLUICE_LEGACY_DOT_TARGET

#define SLUICE_DOT_COLS_TARGET SLUICE_AVX512VNNI
#include "kernels/x86/dot_cols_x86_body.h"  // dispatch_cols, SymmetricCols
#undef SLUICE_DOT_COLS_TARGET

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
  set(GgmlType::Q4_0, &dot_symmetric<Q4_0Levels>, &dispatch_cols<SymmetricCols<Q4_0Levels>>);
  set(GgmlType::Q5_0, &dot_symmetric<Q5_0Levels>, &dispatch_cols<SymmetricCols<Q5_0Levels>>);
  set(GgmlType::Q8_0, &dot_symmetric<Q8_0Levels>, &dispatch_cols<SymmetricCols<Q8_0Levels>>);
  set(GgmlType::IQ4_NL, &dot_symmetric<Iq4NlLevels>, &dispatch_cols<SymmetricCols<Iq4NlLevels>>);
  set(GgmlType::MXFP4, &dot_symmetric<Mxfp4Levels>, &dispatch_cols<SymmetricCols<Mxfp4Levels>>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
