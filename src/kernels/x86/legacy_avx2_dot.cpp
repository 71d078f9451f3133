// AVX2 + FMA + F16C dot products of the legacy formats.
//
// Quantized formats: each weight block is expanded to 32 int8 levels, multiplied
// with the activation's int8 levels by maddubs/madd (exact int32 partial sums),
// converted to float and accumulated with one FMA per block by the block's
// combined scale. Two blocks per iteration into two accumulators hide the FMA
// latency. Results differ from the scalar reference only by float summation
// order (tests/unit/kernels_legacy_test.cpp states the tolerance).
//
// Plain formats (F32/F16/BF16): 32 elements per iteration into 4 independent
// FMA accumulators (float), scalar tail for n % 32.
#if defined(__x86_64__)

#include <cmath>

#include "kernels/x86/legacy_avx2_common.h"
#include "kernels/legacy_impl.h"

namespace sluice::kernels {
namespace avx2 {
namespace {

#define SLUICE_LEGACY_DOT_TARGET SLUICE_AVX2
#include "kernels/x86/legacy_x86_dot_body.h"  // dot_symmetric, dot_offset over dot_i8 / dot_u8_i8
#undef SLUICE_LEGACY_DOT_TARGET

template <class L>
SLUICE_AVX2 float dot_plain(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename L::Elem*>(w);
  const auto* y = static_cast<const typename L::Elem*>(act);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(L::load(x + i), L::load(y + i), acc0);
    acc1 = _mm256_fmadd_ps(L::load(x + i + 8), L::load(y + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(L::load(x + i + 16), L::load(y + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(L::load(x + i + 24), L::load(y + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(L::load(x + i), L::load(y + i), acc0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  // The tail fuses explicitly: left to the compiler (x86/ keeps
  // -ffp-contract=fast), it was fused at -O2 but not at -O0, so Debug and
  // Release builds gave different bits. NEON's tail is the same std::fma.
  for (; i < n; ++i) sum = std::fma(L::scalar(x[i]), L::scalar(y[i]), sum);
  return sum;
}

}  // namespace
}  // namespace avx2

void fill_legacy_avx2_dot(KernelTable& table) {
  using namespace avx2;
  auto set = [&](GgmlType t, VecDotFn fn) { table[static_cast<uint32_t>(t)].vec_dot = fn; };
  set(GgmlType::F32, &dot_plain<F32Load>);
  set(GgmlType::F16, &dot_plain<F16Load>);
  set(GgmlType::BF16, &dot_plain<Bf16Load>);
  set(GgmlType::Q4_0, &dot_symmetric<Q4_0Levels>);
  set(GgmlType::Q5_0, &dot_symmetric<Q5_0Levels>);
  set(GgmlType::Q8_0, &dot_symmetric<Q8_0Levels>);
  set(GgmlType::IQ4_NL, &dot_symmetric<Iq4NlLevels>);
  set(GgmlType::MXFP4, &dot_symmetric<Mxfp4Levels>);
  set(GgmlType::Q4_1, &dot_offset<Q4_1Levels>);
  set(GgmlType::Q5_1, &dot_offset<Q5_1Levels>);
}

}  // namespace sluice::kernels

#endif  // __x86_64__
