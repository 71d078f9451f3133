// Prefill prefetch (--prefetch=prefill, ModelConfig::kPrefetchPrefill): a
// micro-batch of more than one position reads layer l+1's predicted union
// while layer l computes; decode prefetches nothing. It must change timing
// only (bit-identical logits), its counters must be exact where the union is
// known (replayed routing: the prefetch reads exactly the next layer's
// replayed union), and the memory accounting must hold two layers' experts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model_test_support.h"
#include "moe/cache_budget.h"
#include "moe/route_replay.h"
#include "moe/route_trace.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using ::testing::HasSubstr;

const char* const kModel = "golden/qwen3moe-q8_0-q4_0.gguf";
const char* const kStoriesQ8 = "models/stories-moe-8x-q8_0.gguf";  // 5 layers, 8 experts, top-2
constexpr uint64_t kStoriesExpertBytes = 3 * (64 * 192 / 32 * 34);
const std::vector<int32_t> kPrompt = {5, 9, 17, 3, 3, 42, 7, 11, 5, 23};

// 7 tokens x 3 layers, top-2 of 8 experts: each layer's union over the prompt
// is a strict subset of the experts, and differs per layer and micro-batch.
std::shared_ptr<const moe::RouteTrace> small_trace() {
  const int ex[7][3][2] = {{{0, 1}, {2, 3}, {4, 5}}, {{0, 2}, {2, 3}, {6, 7}}, {{1, 0}, {5, 3}, {4, 5}},
                           {{7, 6}, {2, 4}, {4, 0}}, {{0, 1}, {1, 3}, {5, 4}}, {{3, 1}, {2, 3}, {6, 5}},
                           {{1, 2}, {3, 2}, {5, 6}}};
  auto t = std::make_shared<moe::RouteTrace>();
  t->source = "t.jsonl";
  t->format = "sluice";
  for (int tok = 0; tok < 7; ++tok)
    for (int l = 0; l < 3; ++l) {
      moe::RouteRecord r;
      r.pos = tok;
      r.layer = l;
      r.experts = {ex[tok][l][0], ex[tok][l][1]};
      r.weights = {0.6f, 0.4f};
      t->records.push_back(r);
    }
  return t;
}



TEST(PrefillPrefetch, RunsForPromptBatchesOnly) {
  EXPECT_EQ(model::ModelConfig{}.prefetch, 0) << "off by default (docs/benchmarks.md, \"Prefill prefetch\")";
  EXPECT_EQ(model::prefetch_depth_for_batch(model::kPrefetchPrefill, 8, 1), 0) << "decode: off";
  EXPECT_EQ(model::prefetch_depth_for_batch(model::kPrefetchPrefill, 8, 2), 8) << "prefill: every predicted expert";
  EXPECT_EQ(model::prefetch_depth_for_batch(model::kPrefetchPrefill, 8, 512), 8);
  EXPECT_EQ(model::prefetch_depth_for_batch(model::kPrefetchPrefill, 0, 512), 0) << "dense";
  EXPECT_EQ(model::prefetch_depth_for_batch(0, 8, 512), 0) << "--prefetch=off";
  EXPECT_EQ(model::prefetch_depth_for_batch(3, 8, 512), 3) << "an explicit depth holds at every batch size";
  EXPECT_EQ(model::prefetch_depth_for_batch(3, 8, 1), 3);
  EXPECT_EQ(model::prefetch_depth_for_batch(model::kPrefetchAuto, 8, 64), 4);
  EXPECT_THAT(error_of([] { model::prefetch_depth_for_batch(-3, 8, 1); }), HasSubstr("prefetch depth"));
}

// With replayed routing the prefetch reads exactly layer l+1's replayed union
// of the micro-batch's positions: every prefetched expert is used, every
// needed one after the first layer was prefetched, and with the cache off no
// read is wasted. Decode (one position) prefetches nothing.
TEST(PrefillPrefetch, ReplayedPrefillPrefetchesExactlyTheNextLayersUnion) {
  REQUIRE_SHARED(kModel);
  const std::string path = shared_path(kModel);
  const auto trace = small_trace();
  for (int ubatch : {512, 4}) {
    model::ModelConfig c = golden_config();
    c.prefetch = model::kPrefetchPrefill;
    c.route_replay = trace;
    c.ubatch = ubatch;
    auto m = load(path, c);
    const model::HParams hp = m->hparams();
    const int n_layer = static_cast<int>(hp.n_layer), k = static_cast<int>(hp.n_expert_used);
    ASSERT_EQ(m->stats().prefetch, 0) << "no prefetch at decode";
    ASSERT_EQ(m->stats().prefill_prefetch, k);
    const moe::RouteReplay want(*trace, static_cast<int>(hp.n_expert), k);
    // Per micro-batch and layer, the replayed union of its positions.
    uint64_t pf_layers = 0, pf_experts = 0, distinct_all = 0;
    const int T = static_cast<int>(kPrompt.size());
    for (int c0 = 0; c0 < T; c0 += ubatch) {
      const int n = std::min(ubatch, T - c0);
      for (int l = 0; l < n_layer; ++l) {
        std::set<int> u;
        for (int t = c0; t < c0 + n; ++t) u.insert(want.experts(static_cast<uint64_t>(t), l), want.experts(t, l) + k);
        distinct_all += u.size();
        if (l > 0 && n > 1) {  // layer 0 has no layer before it to start a prefetch
          ++pf_layers;
          pf_experts += u.size();
        }
      }
    }
    ASSERT_GT(pf_experts, 0u);
    ASSERT_LT(pf_experts, pf_layers * hp.n_expert) << "the unions must not be whole layers, or nothing is tested";
    const std::string at = "ubatch " + std::to_string(ubatch);
    eval_all(*m, kPrompt);
    const model::ModelStats s = m->stats();
    const model::PrefetchCounters& p = s.prefetch_counters;
    EXPECT_EQ(p.layers, pf_layers) << at;
    EXPECT_EQ(p.experts, pf_experts) << at;
    EXPECT_EQ(p.used, pf_experts) << at;
    EXPECT_EQ(p.needed, pf_experts) << at;
    EXPECT_EQ(p.wasted, 0u) << at;
    EXPECT_EQ(p.wasted_bytes, 0u) << at;
    EXPECT_EQ(p.failed, 0u) << at;
    EXPECT_EQ(s.experts.read, distinct_all) << at;
    EXPECT_EQ(s.io.experts_read, distinct_all) << at << ": cache off, nothing read twice or in vain";
    // Decode: one position per eval, no prefetch.
    const int32_t one[1] = {7};
    std::vector<float> logits(hp.n_vocab);
    m->eval(one, T, logits.data());
    EXPECT_EQ(m->stats().prefetch_counters.layers, pf_layers) << at;
    EXPECT_EQ(m->stats().prefetch_counters.experts, pf_experts) << at;
  }
}

// Logits do not depend on the prefill prefetch: replayed routing and the
// router, cache off and on, one and two threads, prompt and decode.
TEST(PrefillPrefetch, LogitsAreBitIdenticalWithAndWithoutIt) {
  REQUIRE_SHARED(kModel);
  const std::string path = shared_path(kModel);
  const auto trace = small_trace();
  for (bool replay : {true, false})
    for (uint64_t cache : {uint64_t{0}, uint64_t{64} << 20})
      for (int threads : {1, 2}) {
        model::ModelConfig on = golden_config();
        on.prefetch = model::kPrefetchPrefill;
        on.threads = threads;
        on.cache_bytes = cache;
        if (replay) on.route_replay = trace;
        model::ModelConfig off = on;
        off.prefetch = 0;
        const std::string what = std::string(replay ? "replay" : "router") + (cache ? ", cache 64 MiB" : ", cache off") +
                                 ", threads " + std::to_string(threads);
        auto m_off = load(path, off);
        auto m_on = load(path, on);
        EXPECT_TRUE(same_bits(prefill_and_decode(*m_off, kPrompt, 4), prefill_and_decode(*m_on, kPrompt, 4))) << what;
        EXPECT_EQ(m_off->stats().prefetch_counters.layers, 0u) << what;
        const model::PrefetchCounters& p = m_on->stats().prefetch_counters;
        EXPECT_EQ(p.layers, m_on->hparams().n_layer - 1) << what << ": one prefill micro-batch, every layer after the first";
        EXPECT_GT(p.used, 0u) << what;
        EXPECT_EQ(p.experts, p.used + p.wasted) << what;
        if (replay) {
          EXPECT_EQ(p.used, p.needed) << what << ": the replay predicts exactly";
        }
        EXPECT_EQ(m_on->stats().experts.routed, m_off->stats().experts.routed) << what;
      }
}

// ---- memory ------------------------------------------------------------------

TEST(PrefillPrefetch, InFlightBytesHoldTwoLayers) {
  constexpr uint64_t e = 94 * moe::kMiB;  // Mixtral-like: 8 experts, top-2
  const std::vector<moe::MoeLayerShape> layers(4, moe::MoeLayerShape{e, 8, 2});
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 1, 0), moe::cache_floor_bytes(layers, 1));
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 1, 0), 2 * e);
  // Decode at full depth: the layer's own 2, its 2 predicted (right or wrong),
  // the next layer's 2 predicted.
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 1, 2), 6 * e);
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 1, 1), (3 + 1) * e);
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 2, 2), (8 + 4) * e);
  // A long prompt: two whole layers, twice the one-layer floor at that ubatch.
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 64, 2), 16 * e);
  EXPECT_EQ(moe::experts_in_flight_bytes(layers, 64, 2), 2 * moe::cache_floor_bytes(layers, 64));
  // No MoE layer follows another: nothing is prefetched, one layer's floor.
  const std::vector<moe::MoeLayerShape> alternating = {{e, 8, 2}, {0, 0, 0}, {e, 8, 2}};
  EXPECT_EQ(moe::experts_in_flight_bytes(alternating, 64, 2), 8 * e);
  // Different layers: the widest adjacent pair.
  const std::vector<moe::MoeLayerShape> mixed = {{e, 8, 2}, {2 * e, 8, 2}, {e, 8, 2}};
  EXPECT_EQ(moe::experts_in_flight_bytes(mixed, 64, 2), 8 * e + 8 * 2 * e);
}

// A fixed cache must pin decode's in-flight experts: below them, a decode
// prefetch is an Error naming --cache-mb and the floor; prefetch off or
// prefill-only keeps the one-layer floor.
TEST(PrefillPrefetch, TheCacheFloorCountsDecodesPrefetchedLayer) {
  REQUIRE_SHARED(kStoriesQ8);
  const std::string path = shared_path(kStoriesQ8);
  model::ModelConfig c = golden_config();
  c.cache_bytes = 4 * kStoriesExpertBytes;  // above 2 experts (one layer), below 6 (with depth 2)
  EXPECT_EQ(load(path, c)->stats().io.cache_budget_bytes, 4 * kStoriesExpertBytes);
  c.prefetch = model::kPrefetchPrefill;
  EXPECT_EQ(load(path, c)->stats().prefill_prefetch, 2);
  c.prefetch = 2;
  const std::string err = error_of([&] { load(path, c); });
  EXPECT_THAT(err, HasSubstr("--cache-mb"));
  EXPECT_THAT(err, HasSubstr("below the floor of " + moe::format_mib(6 * kStoriesExpertBytes)));
  c.cache_bytes = 6 * kStoriesExpertBytes;
  EXPECT_EQ(load(path, c)->stats().prefetch, 2);
}

}  // namespace
}  // namespace sluice::test
