// The gated DeltaNet kernels (kernels/deltanet.h): every ISA bit for bit
// against the scalar reference (same per-element operations in the same
// order, so exact), the scalar reference against the definitions computed in
// double here (tight bounds: float rounding only), and the conv's taps
// carrying a sequence across calls exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/deltanet.h"
#include "kernels_test_support.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Runs conv_step over T tokens of x ([T][C]) from zero taps in calls of
// `chunk` tokens each (the kernel takes one token; chunks model how a
// sequence reaches it in micro-batches, the taps carrying over).
std::vector<float> conv_sequence(const OpsKernels& k, const std::vector<float>& x, const std::vector<float>& w,
                                 int64_t K, int64_t C, int64_t T, int64_t chunk) {
  std::vector<float> taps(static_cast<size_t>(K - 1) * C, 0.0f), y(static_cast<size_t>(T) * C);
  for (int64_t t0 = 0; t0 < T; t0 += chunk)
    for (int64_t t = t0; t < std::min(T, t0 + chunk); ++t) k.conv_step(taps.data(), &x[t * C], w.data(), K, C, &y[t * C]);
  return y;
}

TEST(DeltaNetKernels, ConvStepIsTheCausalConvolution) {
  const int64_t K = 4, C = 37, T = 9;
  const auto x = random_floats(static_cast<size_t>(T * C), 1);
  const auto w = random_floats(static_cast<size_t>(K * C), 2);
  const auto y = conv_sequence(ops_for(Isa::Scalar) ? *ops_for(Isa::Scalar) : ops(), x, w, K, C, T, T);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double want = 0;  // y[t, c] = sum_i x[t - K + 1 + i, c] * w[i][c], zero before the start
      for (int64_t i = 0; i < K; ++i) {
        const int64_t src = t - K + 1 + i;
        if (src >= 0) want += static_cast<double>(x[src * C + c]) * w[i * C + c];
      }
      EXPECT_NEAR(y[t * C + c], want, 1e-6) << "t " << t << " c " << c;
    }
}

TEST(DeltaNetKernels, ConvTapsCarryAcrossCallsBitForBit) {
  for (int64_t K : {1, 2, 4}) {
    const int64_t C = 19, T = 11;
    const auto x = random_floats(static_cast<size_t>(T * C), 3);
    const auto w = random_floats(static_cast<size_t>(K * C), 4);
    const auto whole = conv_sequence(ops(), x, w, K, C, T, T);
    for (int64_t chunk : {1, 2, 3, 5})
      EXPECT_TRUE(same_bits(conv_sequence(ops(), x, w, K, C, T, chunk), whole)) << "K " << K << " chunk " << chunk;
  }
}

TEST(DeltaNetKernels, ConvStepSimdEqualsScalarBitForBit) {
  const OpsKernels& ref = *ops_for(Isa::Scalar);
  for (Isa isa : simd_isas()) {
    const OpsKernels* k = ops_for(isa);
    if (!k || !k->conv_step) continue;
    for (int64_t C : {1, 7, 8, 9, 64, 100})
      for (int64_t K : {1, 3, 4}) {
        const int64_t T = 6;
        const auto x = random_floats(static_cast<size_t>(T * C), 5);
        const auto w = random_floats(static_cast<size_t>(K * C), 6);
        EXPECT_TRUE(same_bits(conv_sequence(*k, x, w, K, C, T, 1), conv_sequence(ref, x, w, K, C, T, 1)))
            << isa_name(isa) << " C " << C << " K " << K;
      }
  }
}

struct DeltaRun {
  std::vector<float> M, o;  // final state; outputs [T][S]
};

// T tokens of one head from a random starting state.
DeltaRun delta_sequence(const OpsKernels& k, int64_t S, int64_t T, uint32_t seed) {
  DeltaRun r;
  r.M = random_floats(static_cast<size_t>(S * S), seed);
  const auto q = random_floats(static_cast<size_t>(T * S), seed + 1);
  const auto kk = random_floats(static_cast<size_t>(T * S), seed + 2);
  const auto v = random_floats(static_cast<size_t>(T * S), seed + 3);
  const auto g = random_floats(static_cast<size_t>(T), seed + 4, 0.3f, 1.0f);
  const auto b = random_floats(static_cast<size_t>(T), seed + 5, 0.0f, 1.0f);
  std::vector<float> u(static_cast<size_t>(S));
  r.o.resize(static_cast<size_t>(T * S));
  for (int64_t t = 0; t < T; ++t)
    k.delta_step(r.M.data(), &q[t * S], &kk[t * S], &v[t * S], g[t], b[t], S, u.data(), &r.o[t * S]);
  return r;
}

TEST(DeltaNetKernels, DeltaStepMatchesTheDeltaRuleInDouble) {
  const int64_t S = 24, T = 5;
  const uint32_t seed = 10;
  const DeltaRun got = delta_sequence(*ops_for(Isa::Scalar), S, T, seed);
  // The same inputs, the rule written out in double.
  const auto M0 = random_floats(static_cast<size_t>(S * S), seed);
  const auto q = random_floats(static_cast<size_t>(T * S), seed + 1);
  const auto k = random_floats(static_cast<size_t>(T * S), seed + 2);
  const auto v = random_floats(static_cast<size_t>(T * S), seed + 3);
  const auto g = random_floats(static_cast<size_t>(T), seed + 4, 0.3f, 1.0f);
  const auto b = random_floats(static_cast<size_t>(T), seed + 5, 0.0f, 1.0f);
  std::vector<double> M(M0.begin(), M0.end());
  for (int64_t t = 0; t < T; ++t) {
    for (double& m : M) m *= g[t];
    std::vector<double> delta(static_cast<size_t>(S));
    for (int64_t j = 0; j < S; ++j) {
      double mk = 0;  // (M^T k)[j]
      for (int64_t i = 0; i < S; ++i) mk += M[i * S + j] * k[t * S + i];
      delta[j] = b[t] * (v[t * S + j] - mk);
    }
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) M[i * S + j] += k[t * S + i] * delta[j];
    for (int64_t j = 0; j < S; ++j) {
      double o = 0;
      for (int64_t i = 0; i < S; ++i) o += M[i * S + j] * q[t * S + i];
      EXPECT_NEAR(got.o[t * S + j], o, 1e-4 * (1 + std::fabs(o))) << "t " << t << " j " << j;
    }
  }
  for (size_t i = 0; i < M.size(); ++i) EXPECT_NEAR(got.M[i], M[i], 1e-4 * (1 + std::fabs(M[i])));
}

TEST(DeltaNetKernels, DeltaStepSimdEqualsScalarBitForBit) {
  const OpsKernels& ref = *ops_for(Isa::Scalar);
  for (Isa isa : simd_isas()) {
    const OpsKernels* k = ops_for(isa);
    if (!k || !k->delta_step) continue;
    for (int64_t S : {1, 5, 8, 13, 32, 64, 128}) {
      const DeltaRun a = delta_sequence(*k, S, 4, 20), b = delta_sequence(ref, S, 4, 20);
      EXPECT_TRUE(same_bits(a.M, b.M)) << isa_name(isa) << " S " << S;
      EXPECT_TRUE(same_bits(a.o, b.o)) << isa_name(isa) << " S " << S;
    }
  }
}

// A zero state with decay and beta 1 learns v under key k: the output for a
// query equal to a unit k is exactly v.
TEST(DeltaNetKernels, DeltaStepExactValues) {
  const int64_t S = 3;
  std::vector<float> M(9, 0.0f), u(3), o(3);
  const float k[3] = {0, 1, 0}, q[3] = {0, 1, 0}, v[3] = {2, -3, 0.5f};
  ops().delta_step(M.data(), q, k, v, 1.0f, 1.0f, S, u.data(), o.data());
  EXPECT_EQ(o[0], 2.0f);
  EXPECT_EQ(o[1], -3.0f);
  EXPECT_EQ(o[2], 0.5f);
  EXPECT_EQ(M[3 * 1 + 1], -3.0f);  // row 1 (key dim 1) holds v
  // Decay 0.5 halves it before the next update; with beta 0 nothing is written.
  ops().delta_step(M.data(), q, k, v, 0.5f, 0.0f, S, u.data(), o.data());
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_EQ(o[1], -1.5f);
}

}  // namespace
}  // namespace sluice::kernels
