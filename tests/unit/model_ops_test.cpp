// Building blocks of the forward pass, checked against values worked out by hand.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "model/state/kv_rows.h"
#include "model/matmul.h"
#include "model/norm.h"
#include "model/rope.h"
#include "model/router.h"
#include "model/thread_pool.h"
#include "runtime/sampler.h"
#include "util/error.h"

namespace sluice::model {
namespace SLUICE_TEST_FILE {

RopeParams plain_rope(int n_rot, float theta) {
  RopeParams p;
  p.n_rot = static_cast<uint32_t>(n_rot);
  p.theta = theta;
  return p;
}

RouterDesc softmax_all(bool normalize) {
  RouterDesc r;
  r.kind = RouterKind::SoftmaxAll;
  r.normalize = normalize;
  return r;
}

TEST(ModelOps, RmsNormMatchesDefinition) {
  const float x[2] = {3.0f, 4.0f};
  const float w[2] = {1.0f, 2.0f};
  float y[2];
  rms_norm(x, w, 2, 0.0f, y);  // mean(x^2) = 12.5
  const float s = 1.0f / std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(y[0], 3.0f * s);
  EXPECT_FLOAT_EQ(y[1], 4.0f * s * 2.0f);
  rms_norm(x, nullptr, 2, 12.5f, y);  // eps doubles the mean square
  EXPECT_FLOAT_EQ(y[0], 3.0f / 5.0f);
}

TEST(ModelOps, RopePositionZeroIsIdentity) {
  RopeAngles a(plain_rope(4, 10000.0f));
  a.set_position(0);
  std::vector<float> v = {1, 2, 3, 4};
  apply_rope(v.data(), 1, 4, a, RopeType::Neox);
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4}));
}

TEST(ModelOps, RopeNormRotatesAdjacentPairs) {
  // n_rot 4, base 100: pair 0 angle = pos, pair 1 angle = pos * 100^(-1/2) = pos / 10.
  RopeAngles a(plain_rope(4, 100.0f));
  a.set_position(2);
  std::vector<float> v = {1, 0, 0, 1, 7};  // 5th dim is past n_rot: untouched
  apply_rope(v.data(), 1, 5, a, RopeType::Norm);
  EXPECT_NEAR(v[0], std::cos(2.0), 1e-6);
  EXPECT_NEAR(v[1], std::sin(2.0), 1e-6);
  EXPECT_NEAR(v[2], -std::sin(0.2), 1e-6);
  EXPECT_NEAR(v[3], std::cos(0.2), 1e-6);
  EXPECT_EQ(v[4], 7.0f);
}

TEST(ModelOps, RopeNeoxRotatesHalfSplitPairs) {
  RopeAngles a(plain_rope(4, 100.0f));
  a.set_position(2);
  std::vector<float> v = {1, 0, 0, 1};  // pairs (0,2) and (1,3)
  apply_rope(v.data(), 1, 4, a, RopeType::Neox);
  EXPECT_NEAR(v[0], std::cos(2.0), 1e-6);
  EXPECT_NEAR(v[2], std::sin(2.0), 1e-6);
  EXPECT_NEAR(v[1], -std::sin(0.2), 1e-6);
  EXPECT_NEAR(v[3], std::cos(0.2), 1e-6);
}

TEST(ModelOps, RouterSoftmaxTopKRenormalised) {
  const float logits[4] = {0.0f, std::log(3.0f), std::log(2.0f), 0.0f};  // probs 1/7, 3/7, 2/7, 1/7
  Routing r;
  route_topk(softmax_all(true), nullptr, logits, 1, 4, 2, r);
  EXPECT_EQ(r.expert(0, 0), 1);
  EXPECT_EQ(r.expert(0, 1), 2);
  EXPECT_NEAR(r.weight(0, 0), 0.6f, 1e-6);
  EXPECT_NEAR(r.weight(0, 1), 0.4f, 1e-6);
  route_topk(softmax_all(false), nullptr, logits, 1, 4, 2, r);
  EXPECT_NEAR(r.weight(0, 0), 3.0f / 7.0f, 1e-6);
}

TEST(ModelOps, RouterTiesPickLowerExpertId) {
  const float logits[8] = {1, 5, 5, 1, /* token 1: */ 2, 2, 2, 2};
  Routing r;
  route_topk(softmax_all(true), nullptr, logits, 2, 4, 3, r);
  EXPECT_EQ(r.expert(0, 0), 1);
  EXPECT_EQ(r.expert(0, 1), 2);
  EXPECT_EQ(r.expert(0, 2), 0);
  EXPECT_EQ(r.expert(1, 0), 0);
  EXPECT_EQ(r.expert(1, 1), 1);
  EXPECT_EQ(r.expert(1, 2), 2);
  EXPECT_NEAR(r.weight(1, 0), 1.0f / 3.0f, 1e-6);
}

TEST(ModelOps, ThreadPoolCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ModelOps, ThreadPoolRethrowsWorkerErrors) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(9, [](int64_t b, int64_t) {
    if (b > 0) throw Error("boom");
  }), Error);
  int sum = 0;  // still usable afterwards
  pool.parallel_for(1, [&](int64_t b, int64_t e) { sum += static_cast<int>(e - b); });
  EXPECT_EQ(sum, 1);
}

TEST(ModelOps, MatmulF32IsExactForSmallIntegers) {
  // W is 3 x 32 (rows of 32 so any block-based kernel table accepts it).
  std::vector<float> w(3 * 32, 0.0f), x(2 * 32, 0.0f);
  for (int i = 0; i < 32; ++i) {
    w[i] = 1;            // row 0: all ones
    w[32 + i] = i;       // row 1: 0..31
    w[64 + i] = i % 2;   // row 2: odd positions
    x[i] = 1;            // token 0: ones
    x[32 + i] = 2;       // token 1: twos
  }
  const WeightMatrix m = make_weight(w.data(), GgmlType::F32, 32, 3, "test.w");
  ThreadPool pool(2);
  QuantizedRows scratch;
  std::vector<float> out(6);
  matmul_f32(m, x.data(), 2, out.data(), pool, scratch);
  EXPECT_EQ(out, (std::vector<float>{32, 496, 16, 64, 992, 32}));
}

TEST(ModelOps, MatmulQuantizedIsThreadCountInvariant) {
  const int n_in = 256, n_out = 300;
  std::vector<float> wf(static_cast<size_t>(n_in) * n_out), x(3 * n_in);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = std::sin(0.37f * i);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * i);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    const size_t rb = *ggml_row_bytes(t, n_in);
    std::vector<uint8_t> wq(rb * n_out);
    for (int r = 0; r < n_out; ++r) kernels::quantize_row(t, &wf[static_cast<size_t>(r) * n_in], &wq[r * rb], n_in);
    const WeightMatrix m = make_weight(wq.data(), t, n_in, n_out, "test.q");
    std::vector<float> ref;
    for (int threads : {1, 2, 3, 4}) {
      ThreadPool pool(threads);
      QuantizedRows scratch;
      std::vector<float> out(3 * n_out);
      matmul_f32(m, x.data(), 3, out.data(), pool, scratch);
      if (ref.empty()) {
        ref = out;
        // Sanity: close to the F32 product (quantization error only).
        double d = 0, s = 0;
        for (int r = 0; r < n_out; ++r) {
          double exact = 0;
          for (int i = 0; i < n_in; ++i) exact += wf[static_cast<size_t>(r) * n_in + i] * x[i];
          d += std::fabs(exact - out[r]);
          s += std::fabs(exact);
        }
        EXPECT_LT(d / s, 0.05) << ggml_type_name(t);
      } else {
        EXPECT_EQ(0, std::memcmp(ref.data(), out.data(), ref.size() * sizeof(float))) << threads << " threads";
      }
    }
  }
}

TEST(ModelOps, MakeWeightRejectsUnsupportedTypes) {
  try {
    make_weight(nullptr, GgmlType::IQ2_XXS, 256, 4, "blk.0.attn_q.weight");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unsupported tensor type IQ2_XXS in tensor blk.0.attn_q.weight");
  }
}

TEST(ModelOps, KvRowsRefuseUnwrittenAndOverflowingPositions) {
  KvRows kv(KvType::F16, 4, 2, 2);
  const float k[2] = {1.5f, -2.0f}, v[2] = {0.25f, 3.0f};
  kv.set_filled(1);
  kv.store(0, k, v);
  float out[2];
  kv.load_k(0, out);
  EXPECT_EQ(out[0], 1.5f);  // exactly representable in F16
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_THROW(kv.load_v(1, out), Error);
  EXPECT_THROW(kv.set_filled(5), Error);
  EXPECT_THROW(kv.truncate(2), Error);  // past what is held
  kv.truncate(0);
  EXPECT_THROW(kv.load_k(0, out), Error);  // forgotten: never read again
  EXPECT_EQ(kv.bytes(), 4u * (2 + 2) * 2);
  EXPECT_THROW(parse_kv_type("q8"), Error);
}

TEST(RuntimeSampler, GreedyTakesLowestIdOnTies) {
  const std::vector<float> l = {0.5f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(runtime::argmax(l), 1);
  runtime::Sampler s({});
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(RuntimeSampler, RepetitionPenaltyChangesTheGreedyChoice) {
  runtime::SamplerConfig c;
  c.repeat_penalty = 2.0f;
  runtime::Sampler s(c);
  const std::vector<float> l = {3.0f, 2.0f};
  const std::vector<int32_t> hist = {0};
  EXPECT_EQ(s.sample(l, hist), 1);  // 3 / 2 < 2
}

TEST(RuntimeSampler, SeededSamplingIsReproducibleAndRespectsTopK) {
  std::vector<float> l(50);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(i % 7);
  runtime::SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 3;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.seed = 42;
  runtime::Sampler a(c), b(c);
  for (int i = 0; i < 100; ++i) {
    const int32_t x = a.sample(l, {});
    EXPECT_EQ(x, b.sample(l, {}));
    EXPECT_EQ(l[x], 6.0f);  // top-3 logits are the three 6s
  }
}

}  // namespace
}  // namespace sluice::model
