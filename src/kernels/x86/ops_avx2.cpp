// AVX2 + FMA versions of the element-wise ops (kernels/ops.h). Functions carry
// a target attribute (no global -mavx2); the registry installs them only when
// the CPU has AVX2, FMA and F16C.
//
// Reductions (dot, sum_squares, exp_sub_sum) use fixed lane-parallel
// accumulators, so their order depends only on n. Element-wise ops without an
// exp (axpy, add, scale_mul, rope) do the scalar operations per element in the
// same order with explicit mul/add intrinsics, so they are bit-identical to
// scalar. g++ contracts a * b + c into an FMA inside an "fma" target function
// (the x86 kernels keep C++'s default -ffp-contract=fast, see CMakeLists.txt),
// even when written as _mm256_mul_ps + _mm256_add_ps, which would round
// differently from scalar; contraction is therefore switched off for this file
// (FMAs here are all explicit), and the tails use masked vector loads/stores.
#include "kernels/kernel_table.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/x86/target.h"

#pragma GCC optimize("fp-contract=off")


namespace sluice::kernels {
namespace {

SLUICE_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

SLUICE_AVX2 inline double hsum4d(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// exp(x) for 8 floats, relative error ~2 ulp: x = n ln2 + r with |r| <= ln2/2
// (ln2 split in two parts so n ln2 is exact enough), exp(r) by a degree-6
// polynomial (the classic Cephes expf coefficients), times 2^n built in the
// exponent bits. Inputs are clamped to [-87, 88] so 2^n stays a normal float;
// results below e^-87 (~1.6e-38) are flushed to 0, above e^88 saturate at
// ~1.65e38 (callers only need large-but-finite there: silu of very negative g).
SLUICE_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.0f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
  return _mm256_andnot_ps(underflow, result);
}

// Lanes [0, rest) set, rest in [0, 8].
SLUICE_AVX2 inline __m256i tail_mask(int64_t rest) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rest)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

SLUICE_AVX2 inline float dot_inline(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  if (i + 8 <= n) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    i += 8;
  }
  float s = hsum8(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

SLUICE_AVX2 float dot_avx2(const float* a, const float* b, int64_t n) { return dot_inline(a, b, n); }

SLUICE_AVX2 void dot_rows_avx2(const float* q, const float* base, int64_t stride, int64_t n_rows, int64_t n,
                               float scale, float* out) {
  if (n == 8) {  // one vector per row (head_dim 8): skip the generic loop structure
    const __m256 vq = _mm256_loadu_ps(q);
    for (int64_t j = 0; j < n_rows; ++j)
      out[j] = hsum8(_mm256_mul_ps(vq, _mm256_loadu_ps(base + j * stride))) * scale;
    return;
  }
  for (int64_t j = 0; j < n_rows; ++j) out[j] = dot_inline(q, base + j * stride, n) * scale;
}

// Output chunks of up to 32 floats stay in registers across all rows, starting
// from out's values; each lane does out += p[j] * row[d] in ascending j,
// exactly the scalar sequence.
SLUICE_AVX2 void weighted_sum_rows_avx2(const float* p, const float* base, int64_t stride, int64_t n_rows, int64_t n,
                                        float* out) {
  for (int64_t d = 0; d < n; d += 32) {
    __m256i m[4];
    for (int k = 0; k < 4; ++k) m[k] = tail_mask(std::min<int64_t>(8, std::max<int64_t>(0, n - d - 8 * k)));
    __m256 acc0 = _mm256_maskload_ps(out + d, m[0]), acc1 = _mm256_maskload_ps(out + d + 8, m[1]);
    __m256 acc2 = _mm256_maskload_ps(out + d + 16, m[2]), acc3 = _mm256_maskload_ps(out + d + 24, m[3]);
    const int64_t width = n - d;
    if (width >= 32) {
      for (int64_t j = 0; j < n_rows; ++j) {
        const float* r = base + j * stride + d;
        const __m256 pj = _mm256_set1_ps(p[j]);
        acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(pj, _mm256_loadu_ps(r)));
        acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(pj, _mm256_loadu_ps(r + 8)));
        acc2 = _mm256_add_ps(acc2, _mm256_mul_ps(pj, _mm256_loadu_ps(r + 16)));
        acc3 = _mm256_add_ps(acc3, _mm256_mul_ps(pj, _mm256_loadu_ps(r + 24)));
      }
    } else if (width == 8) {
      for (int64_t j = 0; j < n_rows; ++j)
        acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(base + j * stride + d)));
    } else {
      for (int64_t j = 0; j < n_rows; ++j) {
        const float* r = base + j * stride + d;
        const __m256 pj = _mm256_set1_ps(p[j]);
        acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(pj, _mm256_maskload_ps(r, m[0])));
        acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(pj, _mm256_maskload_ps(r + 8, m[1])));
        acc2 = _mm256_add_ps(acc2, _mm256_mul_ps(pj, _mm256_maskload_ps(r + 16, m[2])));
        acc3 = _mm256_add_ps(acc3, _mm256_mul_ps(pj, _mm256_maskload_ps(r + 24, m[3])));
      }
    }
    _mm256_maskstore_ps(out + d, m[0], acc0);
    _mm256_maskstore_ps(out + d + 8, m[1], acc1);
    _mm256_maskstore_ps(out + d + 16, m[2], acc2);
    _mm256_maskstore_ps(out + d + 24, m[3], acc3);
  }
}

SLUICE_AVX2 void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 r = _mm256_add_ps(_mm256_maskload_ps(y + i, m), _mm256_mul_ps(va, _mm256_maskload_ps(x + i, m)));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

SLUICE_AVX2 void add_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, _mm256_add_ps(_mm256_maskload_ps(y + i, m), _mm256_maskload_ps(x + i, m)));
  }
}

SLUICE_AVX2 double sum_squares_avx2(const float* x, int64_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);  // products rounded to float, as scalar
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  double s = hsum4d(_mm256_add_pd(acc0, acc1));
  for (; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
  return s;
}

SLUICE_AVX2 void scale_mul_avx2(const float* x, float s, const float* w, float* y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  if (w) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), vs),
                                                  _mm256_maskload_ps(w + i, m)));
    }
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    if (i < n) {
      const __m256i m = tail_mask(n - i);
      _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vs));
    }
  }
}

// The tail goes through the same vector exp (on a zero-padded copy) so every
// element, wherever it sits, gets the same exp.
SLUICE_AVX2 double exp_sub_sum_avx2(float* x, float m, int64_t n) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  double s = hsum4d(_mm256_add_pd(acc0, acc1));
  if (i < n) {
    alignas(32) float buf[8] = {};
    const int64_t rest = n - i;
    for (int64_t k = 0; k < rest; ++k) buf[k] = x[i + k];
    _mm256_store_ps(buf, exp8(_mm256_sub_ps(_mm256_load_ps(buf), vm)));
    for (int64_t k = 0; k < rest; ++k) {
      x[i + k] = buf[k];
      s += buf[k];
    }
  }
  return s;
}

SLUICE_AVX2 inline __m256 swiglu8(__m256 g, __m256 u) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

SLUICE_AVX2 void swiglu_avx2(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
  if (i < n) {
    alignas(32) float gb[8] = {}, ub[8] = {};
    const int64_t rest = n - i;
    for (int64_t k = 0; k < rest; ++k) {
      gb[k] = g[i + k];
      ub[k] = u[i + k];
    }
    _mm256_store_ps(gb, swiglu8(_mm256_load_ps(gb), _mm256_load_ps(ub)));
    for (int64_t k = 0; k < rest; ++k) g[i + k] = gb[k];
  }
}

SLUICE_AVX2 void rope_neox_avx2(float* v, const float* c, const float* s, int half) {
  for (int j = 0; j < half; j += 8) {
    const __m256i m = tail_mask(half - j);  // all lanes except in the last, partial step
    const __m256 x0 = _mm256_maskload_ps(v + j, m), x1 = _mm256_maskload_ps(v + j + half, m);
    const __m256 vc = _mm256_maskload_ps(c + j, m), vs = _mm256_maskload_ps(s + j, m);
    _mm256_maskstore_ps(v + j, m, _mm256_sub_ps(_mm256_mul_ps(x0, vc), _mm256_mul_ps(x1, vs)));
    _mm256_maskstore_ps(v + j + half, m, _mm256_add_ps(_mm256_mul_ps(x0, vs), _mm256_mul_ps(x1, vc)));
  }
}

// Interleaved pairs: 4 pairs per vector. cos/sin of pair j are duplicated into
// lanes 2j and 2j+1; the partner of each lane is its neighbour (swap within
// pairs), and the sign pattern (-, +) comes from addsub.
SLUICE_AVX2 void rope_norm_avx2(float* v, const float* c, const float* s, int half) {
  const __m256i dup = _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0);
  for (int j = 0; j < half; j += 4) {
    const int pairs = half - j < 4 ? half - j : 4;
    const __m256i m = tail_mask(2 * pairs);
    const __m128i m4 = _mm256_castsi256_si128(tail_mask(pairs));
    const __m256 x = _mm256_maskload_ps(v + 2 * j, m);
    const __m256 vc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(c + j, m4)), dup);
    const __m256 vs = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(s + j, m4)), dup);
    const __m256 swapped = _mm256_permute_ps(x, 0xB1);  // (x1, x0) per pair
    // even lane: x0*c - x1*s ; odd lane: x1*c + x0*s  (same products as scalar)
    _mm256_maskstore_ps(v + 2 * j, m, _mm256_addsub_ps(_mm256_mul_ps(x, vc), _mm256_mul_ps(swapped, vs)));
  }
}

}  // namespace

void fill_ops_avx2(OpsKernels& k) {
  k.dot = dot_avx2;
  k.axpy = axpy_avx2;
  k.dot_rows = dot_rows_avx2;
  k.weighted_sum_rows = weighted_sum_rows_avx2;
  k.add = add_avx2;
  k.sum_squares = sum_squares_avx2;
  k.scale_mul = scale_mul_avx2;
  k.exp_sub_sum = exp_sub_sum_avx2;
  k.swiglu = swiglu_avx2;
  k.rope_neox = rope_neox_avx2;
  k.rope_norm = rope_norm_avx2;
}

}  // namespace sluice::kernels

#endif  // __x86_64__
