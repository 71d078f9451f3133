// The blocks architectures are composed from, against independent
// definitions: YaRN RoPE (ggml's rope_yarn), the three router kinds, the
// gpt-oss activation, and attention sinks and sliding windows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/attention.h"
#include "model/ffn.h"
#include "model/rope.h"
#include "model/router.h"

namespace sluice::model {
namespace SLUICE_TEST_FILE {

// gpt-oss's RoPE: NEOX, 64 dims, theta 150000, YaRN x32 over 4096 positions.
RopeParams gpt_oss_rope() {
  RopeParams p;
  p.type = RopeType::Neox;
  p.n_rot = 64;
  p.theta = 150000.0f;
  p.yarn_factor = 32.0f;
  p.yarn_orig_ctx = 4096;
  return p;
}

// Independently: correction dims 8 (floor of 8.09) and 18 (ceil of 17.4) for
// these parameters; pairs below 8 keep the original angle, pairs above 18 are
// divided by the factor, in between a linear ramp; magnitude 1 + 0.1 ln 32.
TEST(ModelBlocks, YarnRopeAnglesFollowGgml) {
  const RopeParams p = gpt_oss_rope();
  RopeAngles a(p);
  const int64_t pos = 1000;
  a.set_position(pos);
  const double mscale = 1.0 + 0.1 * std::log(32.0);
  const double base = std::pow(150000.0, -2.0 / 64.0);
  auto angle = [&](int j) { return static_cast<double>(pos) * std::pow(base, j); };
  auto expect_pair = [&](int j, double theta) {
    EXPECT_NEAR(a.cos()[j], std::cos(theta) * mscale, 2e-4) << "pair " << j;
    EXPECT_NEAR(a.sin()[j], std::sin(theta) * mscale, 2e-4) << "pair " << j;
  };
  expect_pair(0, angle(0));  // extrapolated
  expect_pair(5, angle(5));
  expect_pair(31, angle(31) / 32.0);  // interpolated
  expect_pair(20, angle(20) / 32.0);
  const double mix = 1.0 - (13.0 - 8.0) / (18.0 - 8.0);  // ramp at pair 13
  expect_pair(13, angle(13) / 32.0 * (1.0 - mix) + angle(13) * mix);
  // Without YaRN the magnitude is 1 and every pair keeps its angle.
  RopeParams plain = p;
  plain.yarn_factor = 0.0f;
  RopeAngles b(plain);
  b.set_position(pos);
  EXPECT_NEAR(b.cos()[31], std::cos(angle(31)), 1e-5);
  EXPECT_FLOAT_EQ(b.cos()[0] * b.cos()[0] + b.sin()[0] * b.sin()[0], 1.0f);
}

RouterDesc router(RouterKind kind, bool normalize) {
  RouterDesc r;
  r.kind = kind;
  r.normalize = normalize;
  return r;
}

// gpt-oss: the top-k of the RAW logits, then a softmax over those k only.
TEST(ModelBlocks, SoftmaxOverTheSelectedExperts) {
  const float logits[4] = {1.0f, 3.0f, 2.0f, -5.0f};
  Routing r;
  route_topk(router(RouterKind::SoftmaxSelected, false), nullptr, logits, 1, 4, 2, r);
  EXPECT_EQ(r.expert(0, 0), 1);
  EXPECT_EQ(r.expert(0, 1), 2);
  const double e = std::exp(-1.0);
  EXPECT_NEAR(r.weight(0, 0), 1.0 / (1.0 + e), 1e-7);
  EXPECT_NEAR(r.weight(0, 1), e / (1.0 + e), 1e-7);
  // The weights do not depend on the experts left out (unlike softmax over all).
  const float other[4] = {1.0f, 3.0f, 2.0f, 2.5f - 100.0f};
  Routing r2;
  route_topk(router(RouterKind::SoftmaxSelected, false), nullptr, other, 1, 4, 2, r2);
  EXPECT_EQ(r.weights, r2.weights);
}

// glm4moe / DeepSeek-V3: the selection bias changes which experts are chosen,
// never their weights (the unbiased sigmoids, renormalised).
TEST(ModelBlocks, SigmoidRouterSelectsWithTheBiasAndWeighsWithout) {
  const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
  const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};
  Routing r;
  route_topk(router(RouterKind::SigmoidBiased, true), bias, logits, 1, 4, 2, r);
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  // Biased scores: .881, .731, .5, 1.269 -> experts 3 and 0; weights by the unbiased sigmoid.
  const double w0 = sig(2.0), w3 = sig(-1.0);
  EXPECT_EQ(r.expert(0, 0), 0);  // slot order: weight descending
  EXPECT_EQ(r.expert(0, 1), 3);
  EXPECT_NEAR(r.weight(0, 0), w0 / (w0 + w3), 1e-6);
  EXPECT_NEAR(r.weight(0, 1), w3 / (w0 + w3), 1e-6);
  Routing raw;
  route_topk(router(RouterKind::SigmoidBiased, false), bias, logits, 1, 4, 2, raw);
  EXPECT_NEAR(raw.weight(0, 0), w0, 1e-6);
}

// Group-limited selection: only the best groups (by the sum of their two best
// biased scores) compete, even when a lone strong expert sits elsewhere.
TEST(ModelBlocks, GroupLimitedSelectionKeepsTheBestGroups) {
  // 8 experts in 4 groups of 2: group scores (sigmoid sums) favour groups 1 and 2.
  const float logits[8] = {4.0f, -6.0f, 1.0f, 1.0f, 1.5f, 0.5f, -3.0f, -3.0f};
  RouterDesc d = router(RouterKind::SigmoidBiased, true);
  d.n_group = 4;
  d.n_group_used = 2;
  Routing r;
  route_topk(d, nullptr, logits, 1, 8, 2, r);
  // Group 0 holds the single best expert (0) but sums .982 + .002 < group 1's 1.462 and group 2's 1.440.
  EXPECT_EQ(r.expert(0, 0), 4);
  EXPECT_TRUE(r.expert(0, 1) == 2 || r.expert(0, 1) == 3);
  EXPECT_EQ(r.expert(0, 1), 2);  // tie -> lower id
  d.n_group_used = 4;  // all groups: expert 0 wins
  route_topk(d, nullptr, logits, 1, 8, 2, r);
  EXPECT_EQ(r.expert(0, 0), 0);
}

TEST(ModelBlocks, SwiGluOaiClampsAndGates) {
  // g = min(gate, 7), u = clamp(up, -7, 7): g * sigmoid(1.702 g) * (u + 1).
  float g[4] = {10.0f, -2.0f, 0.5f, 7.0f};
  const float u[4] = {-20.0f, 3.0f, 20.0f, 0.0f};
  apply_activation(Activation::SwiGluOai, g, u, 4);
  auto ref = [](double gate, double up) {
    const double x = std::min(gate, 7.0), y = std::clamp(up, -7.0, 7.0);
    return x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
  };
  EXPECT_NEAR(g[0], ref(10, -20), 1e-5);  // -6 * ~7
  EXPECT_NEAR(g[1], ref(-2, 3), 1e-6);
  EXPECT_NEAR(g[2], ref(0.5, 20), 1e-5);
  EXPECT_NEAR(g[3], ref(7, 0), 1e-5);
  float s[1] = {1.0f};
  const float one[1] = {2.0f};
  apply_activation(Activation::SwiGlu, s, one, 1);
  EXPECT_NEAR(s[0], 2.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

// One head of dim 2, keys that all score the same: the softmax weights are
// then plain counts, so sinks and windows have exact expected outputs.
struct OneHead {
  HParams hp;
  KvRows kv{KvType::F32, 8, 2, 2};
  OneHead() {
    hp.n_head = hp.n_head_kv = 1;
    hp.head_dim = hp.head_dim_v = 2;
    for (int j = 0; j < 5; ++j) {
      const float k[2] = {0.0f, 0.0f};  // every score 0
      const float v[2] = {static_cast<float>(j), 1.0f};
      kv.set_filled(j + 1);
      kv.store(j, k, v);
    }
  }
  std::vector<float> run(const AttentionOptions& opt) {
    const float q[2] = {1.0f, 1.0f};
    std::vector<float> out(2);
    ThreadPool pool(1);
    Attention a;
    a.run(q, 1, 4, 0, kv, hp, opt, out.data(), pool);  // query at position 4
    return out;
  }
};

TEST(ModelBlocks, AttentionWindowAndSink) {
  OneHead h;
  // Full: mean of values 0..4.
  std::vector<float> full = h.run({});
  EXPECT_FLOAT_EQ(full[0], 2.0f);
  EXPECT_FLOAT_EQ(full[1], 1.0f);
  // Window 2: keys 3 and 4 only (0 <= 4 - j < 2).
  std::vector<float> win = h.run({2, nullptr});
  EXPECT_FLOAT_EQ(win[0], 3.5f);
  // A sink of logit 0 joins the denominator as one more key with no value: 5 keys + 1.
  const float sink[1] = {0.0f};
  std::vector<float> sunk = h.run({0, sink});
  EXPECT_NEAR(sunk[0], 10.0 / 6.0, 1e-6);
  EXPECT_NEAR(sunk[1], 5.0 / 6.0, 1e-6);
  // A sink far above the scores takes the mass (and sets the max).
  const float big[1] = {30.0f};
  EXPECT_LT(h.run({0, big})[1], 1e-12);
  // Window and sink together: 2 keys + 1.
  std::vector<float> both = h.run({2, sink});
  EXPECT_NEAR(both[0], 7.0 / 3.0, 1e-6);
}


// Grouped-query attention over a cache longer than one key block (head_dim
// 128: blocks of 128 keys), F32 and F16: every pool size gives the same bits
// (items are split per KV head and subgroup of query heads, never inside a
// head), and the output is the textbook softmax(q.k * scale) . v computed in
// double from the stored (rounded) keys and values.
TEST(ModelBlocks, AttentionOverManyKeyBlocksMatchesTheDefinitionForAnyPoolSize) {
  HParams hp;
  hp.n_head = 8;
  hp.n_head_kv = 2;
  hp.head_dim = hp.head_dim_v = 128;
  const int n_ctx = 300, k_dim = 2 * 128;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto randoms = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  };
  const std::vector<float> keys = randoms(static_cast<size_t>(n_ctx) * k_dim);
  const std::vector<float> values = randoms(static_cast<size_t>(n_ctx) * k_dim);
  const int n_tokens = 3, pos0 = n_ctx - n_tokens;  // the last 3 positions, as a 3-token ubatch
  const std::vector<float> q = randoms(static_cast<size_t>(n_tokens) * 8 * 128);
  for (KvType type : {KvType::F32, KvType::F16}) {
    KvRows kv(type, n_ctx, k_dim, k_dim);
    kv.set_filled(n_ctx);
    for (int j = 0; j < n_ctx; ++j) kv.store(j, &keys[static_cast<size_t>(j) * k_dim], &values[static_cast<size_t>(j) * k_dim]);
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3, 5}) {
      ThreadPool pool(threads);
      Attention a;
      std::vector<float> out(static_cast<size_t>(n_tokens) * 8 * 128, -1.0f);
      a.run(q.data(), n_tokens, pos0, 0, kv, hp, {}, out.data(), pool);
      outs.push_back(out);
      EXPECT_EQ(0, std::memcmp(outs[0].data(), out.data(), out.size() * sizeof(float)))
          << kv_type_name(type) << ", " << threads << " threads";
    }
    // The definition, over what the cache holds.
    std::vector<float> k_row(k_dim), v_row(k_dim);
    for (int t = 0; t < n_tokens; ++t) {
      for (int h = 0; h < 8; ++h) {
        const int kvh = h / 4;
        std::vector<double> s(static_cast<size_t>(pos0 + t + 1));
        double max_s = -1e300;
        for (int j = 0; j <= pos0 + t; ++j) {
          kv.load_k(j, k_row.data());
          double d = 0;
          for (int i = 0; i < 128; ++i) d += static_cast<double>(q[(static_cast<size_t>(t) * 8 + h) * 128 + i]) * k_row[kvh * 128 + i];
          s[j] = d / std::sqrt(128.0);
          max_s = std::max(max_s, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - max_s));
        for (int i = 0; i < 128; ++i) {
          double o = 0;
          for (int j = 0; j <= pos0 + t; ++j) {
            kv.load_v(j, v_row.data());
            o += s[j] / sum * v_row[kvh * 128 + i];
          }
          ASSERT_NEAR(outs[0][(static_cast<size_t>(t) * 8 + h) * 128 + i], o, 1e-5)
              << kv_type_name(type) << " token " << t << " head " << h << " dim " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::model
