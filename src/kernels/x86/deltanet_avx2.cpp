// AVX2 versions of the gated DeltaNet kernels (kernels/deltanet.h): the
// scalar operations per element, 8 channels (conv) or 8 value dims (state
// update) per register, mul then add (no FMA: contraction is off for this
// file), masked loads and stores for the tails. Bit-identical to scalar.
#include "kernels/deltanet.h"
#include "kernels/kernel_table.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/x86/target.h"

#pragma GCC optimize("fp-contract=off")

namespace sluice::kernels {
namespace {

// Lanes [0, rest) set, rest in [0, 8].
SLUICE_AVX2 inline __m256i lanes(int64_t rest) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest < 8 ? rest : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

SLUICE_AVX2 void conv_step_avx2(float* taps, const float* x, const float* w, int64_t K, int64_t C, float* y) {
  for (int64_t c = 0; c < C; c += 8) {
    const __m256i m = lanes(C - c);
    __m256 s = _mm256_setzero_ps();
    for (int64_t i = 0; i + 1 < K; ++i)
      s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_maskload_ps(taps + i * C + c, m),
                                         _mm256_maskload_ps(w + i * C + c, m)));
    s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_maskload_ps(x + c, m), _mm256_maskload_ps(w + (K - 1) * C + c, m)));
    _mm256_maskstore_ps(y + c, m, s);
  }
  if (K < 2) return;
  std::memmove(taps, taps + C, sizeof(float) * static_cast<size_t>((K - 2) * C));
  std::memcpy(taps + (K - 2) * C, x, sizeof(float) * static_cast<size_t>(C));
}

SLUICE_AVX2 void delta_step_avx2(float* M, const float* q, const float* k, const float* v, float decay, float beta,
                                 int64_t S, float* u, float* o) {
  const __m256 vdecay = _mm256_set1_ps(decay), vbeta = _mm256_set1_ps(beta);
  for (int64_t j = 0; j < S; j += 8) _mm256_maskstore_ps(u + j, lanes(S - j), _mm256_setzero_ps());
  for (int64_t i = 0; i < S; ++i) {
    float* row = M + i * S;
    const __m256 ki = _mm256_set1_ps(k[i]);
    for (int64_t j = 0; j < S; j += 8) {
      const __m256i m = lanes(S - j);
      const __m256 r = _mm256_mul_ps(_mm256_maskload_ps(row + j, m), vdecay);
      _mm256_maskstore_ps(row + j, m, r);
      _mm256_maskstore_ps(u + j, m, _mm256_add_ps(_mm256_maskload_ps(u + j, m), _mm256_mul_ps(ki, r)));
    }
  }
  for (int64_t j = 0; j < S; j += 8) {
    const __m256i m = lanes(S - j);
    const __m256 d = _mm256_mul_ps(vbeta, _mm256_sub_ps(_mm256_maskload_ps(v + j, m), _mm256_maskload_ps(u + j, m)));
    _mm256_maskstore_ps(u + j, m, d);
    _mm256_maskstore_ps(o + j, m, _mm256_setzero_ps());
  }
  for (int64_t i = 0; i < S; ++i) {
    float* row = M + i * S;
    const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
    for (int64_t j = 0; j < S; j += 8) {
      const __m256i m = lanes(S - j);
      const __m256 r = _mm256_add_ps(_mm256_maskload_ps(row + j, m), _mm256_mul_ps(ki, _mm256_maskload_ps(u + j, m)));
      _mm256_maskstore_ps(row + j, m, r);
      _mm256_maskstore_ps(o + j, m, _mm256_add_ps(_mm256_maskload_ps(o + j, m), _mm256_mul_ps(qi, r)));
    }
  }
}

}  // namespace

void fill_deltanet_avx2(OpsKernels& k) {
  k.conv_step = conv_step_avx2;
  k.delta_step = delta_step_avx2;
}

}  // namespace sluice::kernels

#endif  // __x86_64__
