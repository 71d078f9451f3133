// AVX-VNNI multi-column dot products (TypeKernels::vec_dot_cols): one weight
// row against up to kMaxDotCols activation rows, decoding each weight block
// once for all columns.
//
// Contract (quant.h): out[j] is bit-identical to the AVX-VNNI vec_dot of the
// same type, which is itself bit-identical to the AVX2 one: the block loops are
// the AVX2 ones (dot_cols_x86_body.h); only the integer products change, to
// instructions producing the same int32 lanes (see legacy_vnni_dot.cpp and
// kquant_vnni.cpp for why they are equal). tests/unit/kernels_vnni_test.cpp
// checks the bit-identity.
#include "kernels/kernel_table.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels {
namespace cols_vnni {
namespace {

// Same lanes as avx2::dot_u8_i8 (madd(maddubs(u, y), ones)).
SLUICE_AVXVNNI inline __m256i dot_u8_i8(__m256i u, __m256i y) {
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, y);
}

// Same lanes as acc + madd_epi16(s, p).
SLUICE_AVXVNNI inline __m256i madd_acc(__m256i acc, __m256i s, __m256i p) {
  return _mm256_dpwssd_avx_epi32(acc, s, p);
}

#define SLUICE_DOT_COLS_TARGET SLUICE_AVXVNNI
#include "kernels/x86/dot_cols_x86_body.h"  // dispatch_cols, SymmetricCols, K4StyleCols, Q6KCols
#undef SLUICE_DOT_COLS_TARGET

}  // namespace

}  // namespace cols_vnni

void fill_dot_cols_vnni(KernelTable& table) {
  using namespace cols_vnni;
  auto set = [&](GgmlType t, VecDotColsFn fn) { table[static_cast<uint32_t>(t)].vec_dot_cols = fn; };
  set(GgmlType::Q4_0, &dispatch_cols<SymmetricCols<avx2::Q4_0Levels>>);
  set(GgmlType::Q8_0, &dispatch_cols<SymmetricCols<avx2::Q8_0Levels>>);
  set(GgmlType::Q4_K, &dispatch_cols<K4StyleCols<false>>);
  set(GgmlType::Q5_K, &dispatch_cols<K4StyleCols<true>>);
  set(GgmlType::Q6_K, &dispatch_cols<Q6KCols>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
