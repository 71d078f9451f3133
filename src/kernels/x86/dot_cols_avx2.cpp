// AVX2 multi-column dot products (TypeKernels::vec_dot_cols): one weight row
// against up to kMaxDotCols activation rows. The weight block is loaded and
// decoded (nibble unpacking, scale unpacking, sign handling) once and reused for
// every column; each column keeps its own accumulators.
//
// Contract (quant.h): out[j] is bit-identical to the AVX2 vec_dot of the same
// type. The quantized formats run the block loops shared with AVX-VNNI
// (dot_cols_x86_body.h), which mirror the single-column loops on the float
// side; the plain formats below mirror dot_plain. tests/unit/kernels_gemm_test.cpp
// checks the bit-identity.
#include <cmath>

#include "kernels/kernel_table.h"

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels {
namespace cols_avx2 {
namespace {

using avx2::dot_u8_i8;
using avx2::hsum;
using avx2::F16Load;
using avx2::F32Load;

SLUICE_AVX2 inline __m256i madd_acc(__m256i acc, __m256i s, __m256i p) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(s, p));
}

#define SLUICE_DOT_COLS_TARGET SLUICE_AVX2
#include "kernels/x86/dot_cols_x86_body.h"  // dispatch_cols, SymmetricCols, K4StyleCols, Q6KCols
#undef SLUICE_DOT_COLS_TARGET

// ---- Plain formats (mirrors dot_plain: 4 accumulators per column) ----

template <class L>
struct PlainCols {
  // Four accumulators per column: more than two columns at once would spill
  // them, so wider calls are served two columns at a time.
  template <int N>
  SLUICE_AVX2 static void run(int64_t n, const void* w, const void* const* act, float* out) {
    if constexpr (N > 2) {
      run<2>(n, w, act, out);
      run<N - 2>(n, w, act + 2, out + 2);
    } else {
      const auto* x = static_cast<const typename L::Elem*>(w);
      const typename L::Elem* y[N];
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) y[j] = static_cast<const typename L::Elem*>(act[j]);
      __m256 a0[N], a1[N], a2[N], a3[N];
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) a0[j] = a1[j] = a2[j] = a3[j] = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 32 <= n; i += 32) {
        const __m256 x0 = L::load(x + i), x1 = L::load(x + i + 8);
        const __m256 x2 = L::load(x + i + 16), x3 = L::load(x + i + 24);
        #pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
          a0[j] = _mm256_fmadd_ps(x0, L::load(y[j] + i), a0[j]);
          a1[j] = _mm256_fmadd_ps(x1, L::load(y[j] + i + 8), a1[j]);
          a2[j] = _mm256_fmadd_ps(x2, L::load(y[j] + i + 16), a2[j]);
          a3[j] = _mm256_fmadd_ps(x3, L::load(y[j] + i + 24), a3[j]);
        }
      }
      const int64_t tail8 = i;
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        int64_t k = tail8;
        for (; k + 8 <= n; k += 8) a0[j] = _mm256_fmadd_ps(L::load(x + k), L::load(y[j] + k), a0[j]);
        float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0[j], a1[j]), _mm256_add_ps(a2[j], a3[j])));
        for (; k < n; ++k) sum = std::fma(L::scalar(x[k]), L::scalar(y[j][k]), sum);  // as vec_dot's tail
        out[j] = sum;
      }
    }
  }
};

}  // namespace

}  // namespace cols_avx2

void fill_dot_cols_avx2(KernelTable& table) {
  using namespace cols_avx2;
  auto set = [&](GgmlType t, VecDotColsFn fn) { table[static_cast<uint32_t>(t)].vec_dot_cols = fn; };
  set(GgmlType::F32, &dispatch_cols<PlainCols<F32Load>>);
  set(GgmlType::F16, &dispatch_cols<PlainCols<F16Load>>);
  set(GgmlType::Q4_0, &dispatch_cols<SymmetricCols<avx2::Q4_0Levels>>);
  set(GgmlType::Q8_0, &dispatch_cols<SymmetricCols<avx2::Q8_0Levels>>);
  set(GgmlType::Q4_K, &dispatch_cols<K4StyleCols<false>>);
  set(GgmlType::Q5_K, &dispatch_cols<K4StyleCols<true>>);
  set(GgmlType::Q6_K, &dispatch_cols<Q6KCols>);
}


}  // namespace sluice::kernels

#endif  // __x86_64__

