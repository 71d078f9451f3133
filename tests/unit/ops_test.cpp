// Element-wise ops (kernels/ops.h): exact values from their definitions, and
// every ISA against the scalar reference (bit-identical where ops.h says so,
// within stated tolerances for reductions and exp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels_test_support.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

std::vector<float> random_floats(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<const OpsKernels*> simd_sets() {
  std::vector<const OpsKernels*> out;
  for (Isa isa : simd_isas())
    if (const OpsKernels* k = ops_for(isa)) out.push_back(k);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Lengths covering empty, pure tails, one vector, vectors + tails.
constexpr int64_t kLengths[] = {0, 1, 7, 8, 9, 16, 31, 64, 100, 1000};

TEST(KernelsOps, ExactValuesFromDefinitions) {
  const OpsKernels& k = ops();
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<float> b = {1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
  EXPECT_EQ(k.dot(a.data(), b.data(), 10), 65.0f);
  EXPECT_EQ(k.sum_squares(a.data(), 10), 385.0);
  std::vector<float> y(10, 1.0f);
  k.axpy(2.0f, a.data(), y.data(), 10);
  EXPECT_EQ(y[9], 21.0f);
  k.add(y.data(), b.data(), 10);
  EXPECT_EQ(y[0], 4.0f);
  std::vector<float> s(10);
  k.scale_mul(a.data(), 0.5f, b.data(), s.data(), 10);
  EXPECT_EQ(s[9], 10.0f);
  k.scale_mul(a.data(), 0.5f, nullptr, s.data(), 10);
  EXPECT_EQ(s[9], 5.0f);
  // exp(x - m): [0, ln 2, ln 4, -inf] - 0 -> [1, 2, 4, 0].
  std::vector<float> e = {0.0f, std::log(2.0f), std::log(4.0f), -INFINITY};
  const double sum = k.exp_sub_sum(e.data(), 0.0f, 4);
  EXPECT_NEAR(e[0], 1.0f, 1e-6);
  EXPECT_NEAR(e[1], 2.0f, 4e-6);
  EXPECT_NEAR(e[2], 4.0f, 8e-6);
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_NEAR(sum, 7.0, 2e-5);
  // silu(0) = 0, silu(x) -> x for large x, -> -0 for very negative x.
  std::vector<float> g = {0.0f, 30.0f, -200.0f, 1.0f};
  const std::vector<float> u = {5.0f, 2.0f, 1.0f, 1.0f};
  k.swiglu(g.data(), u.data(), 4);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 60.0f, 1e-4);
  EXPECT_TRUE(std::isfinite(g[2]));
  EXPECT_NEAR(g[2], 0.0f, 1e-30);
  EXPECT_NEAR(g[3], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6);
}

TEST(KernelsOps, RopeRotatesTheRightPairs) {
  const OpsKernels& k = ops();
  // Quarter turn for every pair: (x0, x1) -> (-x1, x0).
  for (int half : {2, 4, 8, 13}) {
    std::vector<float> c(half, 0.0f), s(half, 1.0f);
    std::vector<float> v(2 * half), w(2 * half);
    for (int i = 0; i < 2 * half; ++i) v[i] = w[i] = static_cast<float>(i + 1);
    k.rope_neox(v.data(), c.data(), s.data(), half);
    k.rope_norm(w.data(), c.data(), s.data(), half);
    for (int j = 0; j < half; ++j) {
      EXPECT_EQ(v[j], -static_cast<float>(j + half + 1)) << half;
      EXPECT_EQ(v[j + half], static_cast<float>(j + 1)) << half;
      EXPECT_EQ(w[2 * j], -static_cast<float>(2 * j + 2)) << half;
      EXPECT_EQ(w[2 * j + 1], static_cast<float>(2 * j + 1)) << half;
    }
  }
}

TEST(KernelsOps, SimdElementwiseOpsAreBitIdenticalToScalar) {
  const OpsKernels& ref = *ops_for(Isa::Scalar);
  for (const OpsKernels* k : simd_sets()) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_floats(n, 1), w = random_floats(n, 2), y0 = random_floats(n, 3);
      std::vector<float> a = y0, b = y0;
      if (k->axpy) {
        ref.axpy(0.37f, x.data(), a.data(), n);
        k->axpy(0.37f, x.data(), b.data(), n);
        EXPECT_TRUE(same_bits(a, b)) << "axpy n=" << n;
      }
      if (k->add) {
        ref.add(a.data(), x.data(), n);
        k->add(b.data(), x.data(), n);
        EXPECT_TRUE(same_bits(a, b)) << "add n=" << n;
      }
      if (k->scale_mul) {
        for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
          ref.scale_mul(x.data(), 1.7f, wp, a.data(), n);
          k->scale_mul(x.data(), 1.7f, wp, b.data(), n);
          EXPECT_TRUE(same_bits(a, b)) << "scale_mul n=" << n;
        }
      }
      const int half = static_cast<int>(n / 2);
      const std::vector<float> c = random_floats(half, 4), s = random_floats(half, 5);
      if (k->rope_neox) {
        a = x, b = x;
        ref.rope_neox(a.data(), c.data(), s.data(), half);
        k->rope_neox(b.data(), c.data(), s.data(), half);
        EXPECT_TRUE(same_bits(a, b)) << "rope_neox n=" << n;
      }
      if (k->rope_norm) {
        a = x, b = x;
        ref.rope_norm(a.data(), c.data(), s.data(), half);
        k->rope_norm(b.data(), c.data(), s.data(), half);
        EXPECT_TRUE(same_bits(a, b)) << "rope_norm n=" << n;
      }
    }
  }
}

TEST(KernelsOps, SimdReductionsAndExpMatchScalarClosely) {
  const OpsKernels& ref = *ops_for(Isa::Scalar);
  for (const OpsKernels* k : simd_sets()) {
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_floats(n, 11), y = random_floats(n, 12);
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(x[i] * y[i]);
      // Reordered float sum: error bounded by ~n * 2^-24 * sum|x y|.
      if (k->dot) {
        EXPECT_NEAR(k->dot(x.data(), y.data(), n), ref.dot(x.data(), y.data(), n), 1e-6 * mag + 1e-7);
      }
      if (k->sum_squares) {
        const double r = ref.sum_squares(x.data(), n);
        EXPECT_NEAR(k->sum_squares(x.data(), n), r, 1e-12 * r + 1e-30) << n;  // double sums of float products
      }
      if (k->exp_sub_sum) {
        std::vector<float> a = random_floats(n, 13, 4.0f), b = a;
        const double ra = ref.exp_sub_sum(a.data(), 3.0f, n);
        const double rb = k->exp_sub_sum(b.data(), 3.0f, n);
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(b[i], a[i], 4e-7 * a[i]) << "exp n=" << n << " i=" << i;
        EXPECT_NEAR(rb, ra, 4e-7 * ra + 1e-30);
      }
      if (k->swiglu) {
        std::vector<float> a = random_floats(n, 14, 3.0f), b = a;
        ref.swiglu(a.data(), y.data(), n);
        k->swiglu(b.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i)
          EXPECT_NEAR(b[i], a[i], 1e-6 * std::fabs(a[i]) + 1e-30) << "swiglu n=" << n << " i=" << i;
      }
    }
  }
}

// Element-wise results must not depend on where an element sits (vector body
// or tail): callers split rows over threads at arbitrary offsets.
TEST(KernelsOps, SwigluAndExpGiveTheSameValueAtAnyOffset) {
  for (const OpsKernels* k : {&ops(), ops_for(Isa::Scalar)}) {
    const int64_t n = 61;
    const std::vector<float> g0 = random_floats(n, 31, 3.0f), u = random_floats(n, 32);
    std::vector<float> whole = g0;
    k->swiglu(whole.data(), u.data(), n);
    std::vector<float> e_whole = g0;
    k->exp_sub_sum(e_whole.data(), 1.0f, n);
    for (int64_t split : {1, 3, 8, 13, 60}) {
      std::vector<float> parts = g0, e_parts = g0;
      k->swiglu(parts.data(), u.data(), split);
      k->swiglu(parts.data() + split, u.data() + split, n - split);
      k->exp_sub_sum(e_parts.data(), 1.0f, split);
      k->exp_sub_sum(e_parts.data() + split, 1.0f, n - split);
      EXPECT_TRUE(same_bits(whole, parts)) << "swiglu split " << split;
      EXPECT_TRUE(same_bits(e_whole, e_parts)) << "exp split " << split;
    }
  }
}

// Attention row kernels: dot_rows equals dot * scale of the same ISA per row;
// weighted_sum_rows equals the scalar accumulation onto out bit for bit (ops.h).
TEST(KernelsOps, AttentionRowKernelsMatchTheirDefinitions) {
  const OpsKernels& ref = *ops_for(Isa::Scalar);
  std::vector<const OpsKernels*> sets = simd_sets();
  sets.push_back(&ref);
  for (const OpsKernels* k : sets) {
    for (int64_t n : {1, 5, 8, 16, 33, 64, 72}) {
      const int64_t n_rows = 37, stride = n + 3;  // rows padded, like heads inside a KV row
      const std::vector<float> rows = random_floats(n_rows * stride, 21), q = random_floats(n, 22);
      std::vector<float> p = random_floats(n_rows, 23);
      std::vector<float> scores(n_rows);
      k->dot_rows(q.data(), rows.data(), stride, n_rows, n, 0.125f, scores.data());
      for (int64_t j = 0; j < n_rows; ++j) {
        const float expect = k->dot(q.data(), rows.data() + j * stride, n) * 0.125f;
        EXPECT_EQ(0, std::memcmp(&expect, &scores[j], sizeof(float))) << "dot_rows n=" << n << " row " << j;
      }
      if (!k->weighted_sum_rows) continue;  // a partial set (NEON): scalar's serves, checked as `ref`
      // It accumulates onto out: start from values, not zeros.
      const std::vector<float> init = random_floats(n, 24);
      std::vector<float> a = init, b = init;
      b.push_back(99.0f);  // b[n]: must stay untouched
      ref.weighted_sum_rows(p.data(), rows.data(), stride, n_rows, n, a.data());
      k->weighted_sum_rows(p.data(), rows.data(), stride, n_rows, n, b.data());
      EXPECT_EQ(b[n], 99.0f) << "wrote past n";
      b.resize(n);
      EXPECT_TRUE(same_bits(a, b)) << "weighted_sum_rows n=" << n;
      // Rows in two consecutive calls give the one call's bits (attention's blocks).
      std::vector<float> c = init;
      const int64_t split = n_rows / 3;
      k->weighted_sum_rows(p.data(), rows.data(), stride, split, n, c.data());
      k->weighted_sum_rows(p.data() + split, rows.data() + split * stride, stride, n_rows - split, n, c.data());
      EXPECT_TRUE(same_bits(a, c)) << "weighted_sum_rows in two blocks, n=" << n;
      // Definition, in double: init[d] + sum_j p_j row_j[d].
      for (int64_t d = 0; d < n; ++d) {
        double e = init[d], mag = std::fabs(static_cast<double>(init[d]));
        for (int64_t j = 0; j < n_rows; ++j) {
          e += static_cast<double>(p[j]) * rows[j * stride + d];
          mag += std::fabs(static_cast<double>(p[j]) * rows[j * stride + d]);
        }
        EXPECT_NEAR(b[d], e, 1e-5 * mag) << "weighted_sum_rows n=" << n << " d=" << d;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::kernels
