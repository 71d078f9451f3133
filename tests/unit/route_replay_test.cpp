// --route-replay: the mapping of a recorded trace onto a model's layers and
// experts (hand-worked cases), and the engine reading exactly the experts the
// mapped trace names (counters and --route-trace agree with it), with logits
// still independent of threads and the cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model_test_support.h"
#include "moe/route_replay.h"
#include "moe/route_trace.h"
#include "util/error.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

moe::RouteRecord rec(std::vector<int> e, std::vector<float> w = {}, int layer = 0, int64_t pos = 0) {
  moe::RouteRecord r;
  r.pos = pos;
  r.layer = layer;
  r.experts = std::move(e);
  r.weights = std::move(w);
  return r;
}

struct Mapped {
  std::vector<int32_t> e;
  std::vector<float> w;
};

Mapped map(const moe::RouteRecord& r, int n_expert, int k) {
  Mapped m;
  moe::map_route_record(r, n_expert, k, m.e, m.w);
  return m;
}

TEST(RouteReplayMap, SameShapeIsTheIdentity) {
  const Mapped m = map(rec({7, 0}, {0.75f, 0.25f}), 8, 2);
  EXPECT_THAT(m.e, ElementsAre(7, 0));
  EXPECT_THAT(m.w, ElementsAre(0.75f, 0.25f));
}

TEST(RouteReplayMap, MixtralTop2OntoQwen3Top8ExpandsEachExpertToAGroupOfFour) {
  // m = 8 / 2 = 4: expert 7 -> 28..31 (0.75 / 4 each), expert 0 -> 0..3 (0.25 / 4).
  const Mapped m = map(rec({7, 0}, {0.75f, 0.25f}), 128, 8);
  EXPECT_THAT(m.e, ElementsAre(28, 29, 30, 31, 0, 1, 2, 3));
  EXPECT_THAT(m.w, ElementsAre(0.1875f, 0.1875f, 0.1875f, 0.1875f, 0.0625f, 0.0625f, 0.0625f, 0.0625f));
}

TEST(RouteReplayMap, UnevenTopKKeepsTheFirstKAndRenormalises) {
  // k = 3 from top-2: m = 2, candidates 14, 15 (0.375 each), 0 (0.125) kept; sum 0.875.
  const Mapped m = map(rec({7, 0}, {0.75f, 0.25f}), 128, 3);
  EXPECT_THAT(m.e, ElementsAre(14, 15, 0));
  EXPECT_FLOAT_EQ(m.w[0], 0.375f / 0.875f);
  EXPECT_FLOAT_EQ(m.w[1], 0.375f / 0.875f);
  EXPECT_FLOAT_EQ(m.w[2], 0.125f / 0.875f);
}

TEST(RouteReplayMap, SmallerTopKKeepsTheHeaviest) {
  const Mapped m = map(rec({43, 5, 7, 58}, {0.4f, 0.3f, 0.2f, 0.1f}), 60, 2);
  EXPECT_THAT(m.e, ElementsAre(43, 5));
  EXPECT_FLOAT_EQ(m.w[0], 0.4f / 0.7f);
  EXPECT_FLOAT_EQ(m.w[1], 0.3f / 0.7f);
}

TEST(RouteReplayMap, FewerModelExpertsFoldAndACollisionTakesTheNextFreeId) {
  // 7 mod 4 = 3; 0 -> 0.
  EXPECT_THAT(map(rec({7, 0}, {0.75f, 0.25f}), 4, 2).e, ElementsAre(3, 0));
  // 5 mod 4 = 1; 1 collides with it -> 2.
  EXPECT_THAT(map(rec({5, 1}, {0.75f, 0.25f}), 4, 2).e, ElementsAre(1, 2));
  // 3 mod 4 = 3; 7 mod 4 = 3 collides -> 0 (wraps).
  EXPECT_THAT(map(rec({3, 7}, {0.75f, 0.25f}), 4, 2).e, ElementsAre(3, 0));
}

TEST(RouteReplayMap, NoWeightsGiveUniformSlotsSortedByIdOnTies) {
  const Mapped m = map(rec({6, 2}), 8, 2);
  EXPECT_THAT(m.e, ElementsAre(2, 6));  // equal weights: the lower id first
  EXPECT_THAT(m.w, ElementsAre(0.5f, 0.5f));
}

moe::RouteTrace trace_of(std::vector<moe::RouteRecord> recs) {
  moe::RouteTrace t;
  t.source = "t.jsonl";
  t.format = "sluice";
  t.records = std::move(recs);
  return t;
}

TEST(RouteReplay, LayersWrapTokensWrapAndIncompleteTokensAreSkipped) {
  // Two trace layers; token 1 lacks layer 1 and is skipped.
  const moe::RouteTrace t = trace_of({rec({0, 1}, {0.5f, 0.5f}, 0, 0), rec({2, 3}, {0.5f, 0.5f}, 1, 0),
                                      rec({4, 5}, {0.5f, 0.5f}, 0, 1),
                                      rec({6, 7}, {0.5f, 0.5f}, 0, 2), rec({1, 0}, {0.5f, 0.5f}, 1, 2)});
  const moe::RouteReplay r(t, 8, 2);
  EXPECT_EQ(r.n_tokens(), 2u);
  EXPECT_EQ(r.skipped_tokens(), 1u);
  EXPECT_EQ(r.trace_layers(), 2);
  auto row = [&](uint64_t tok, int layer) { return std::vector<int32_t>(r.experts(tok, layer), r.experts(tok, layer) + 2); };
  EXPECT_THAT(row(0, 0), ElementsAre(0, 1));
  EXPECT_THAT(row(0, 1), ElementsAre(2, 3));
  EXPECT_THAT(row(0, 2), ElementsAre(0, 1));  // model layer 2 -> trace layer 0
  EXPECT_THAT(row(1, 0), ElementsAre(6, 7));  // trace token 2 is the second complete one
  EXPECT_THAT(row(1, 3), ElementsAre(0, 1));  // layer 3 -> 1; weights tie: lower id first
  EXPECT_THAT(row(2, 0), ElementsAre(0, 1));  // token 2 wraps to 0
  EXPECT_THAT(r.describe(), HasSubstr("2 tokens, 1 incomplete skipped"));
}

TEST(RouteReplay, ATraceWithoutACompleteTokenIsAnErrorNamingTheFlag) {
  const moe::RouteTrace t = trace_of({rec({0, 1}, {}, 0, 0), rec({2, 3}, {}, 1, 1)});
  try {
    moe::RouteReplay r(t, 8, 2);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--route-replay t.jsonl"));
  }
}

TEST(RouteReplay, SharedMixtralTraceHasEveryProblemsCompleteTokens) {
  REQUIRE_SHARED("data/routing/mixtral-8x7b/gsm8k_2_routing.jsonl");
  const moe::RouteTrace t = moe::read_route_trace(shared_path("data/routing/mixtral-8x7b/gsm8k_2_routing.jsonl"));
  const moe::RouteReplay r(t, 128, 8);
  // Problems of 168 and 79 decode steps (shared/data/README.md); a short
  // layer lacks its last 1-2 token indices, so those tokens are skipped.
  EXPECT_EQ(r.n_tokens() + r.skipped_tokens(), 168u + 79u);
  EXPECT_EQ(r.skipped_tokens(), 2u + 1u);
  EXPECT_EQ(r.trace_layers(), 32);
  EXPECT_EQ(r.group(), 4);
}

// ---- the engine ----

const char* kModel = "golden/qwen3moe-q8_0-q4_0.gguf";

// A replayed trace over 3 layers x top-2 of 8 experts, 6 tokens: repeats
// within a layer so a cache has hits, and layer counts that differ from the model's.
moe::RouteTrace small_trace() {
  const int ex[6][3][2] = {{{0, 1}, {2, 3}, {4, 5}}, {{0, 2}, {2, 3}, {6, 7}}, {{1, 0}, {5, 3}, {4, 5}},
                           {{7, 6}, {2, 4}, {4, 0}}, {{0, 1}, {1, 3}, {5, 4}}, {{3, 1}, {2, 3}, {6, 5}}};
  std::vector<moe::RouteRecord> recs;
  for (int t = 0; t < 6; ++t)
    for (int l = 0; l < 3; ++l) recs.push_back(rec({ex[t][l][0], ex[t][l][1]}, {0.6f, 0.4f}, l, t));
  return trace_of(std::move(recs));
}

std::vector<float> decode_all(model::Model& m, const std::vector<int32_t>& tokens) {
  m.reset();
  const size_t nv = m.hparams().n_vocab;
  std::vector<float> out(tokens.size() * nv);
  for (size_t i = 0; i < tokens.size(); ++i)
    m.eval(std::span<const int32_t>(&tokens[i], 1), static_cast<int>(i), &out[i * nv]);
  return out;
}

TEST(RouteReplayEngine, ReadsExactlyTheExpertsTheMappedTraceNames) {
  REQUIRE_SHARED(kModel);
  const std::string path = shared_path(kModel);
  auto probe = load(path, golden_config());
  const model::HParams hp = probe->hparams();
  const int n_layer = static_cast<int>(hp.n_layer), n_expert = static_cast<int>(hp.n_expert);
  const int k = static_cast<int>(hp.n_expert_used);
  uint64_t all_bytes = 0;
  for (int l = 0; l < n_layer; ++l) all_bytes += probe->expert_bytes(l) * static_cast<uint64_t>(n_expert);
  probe.reset();

  auto trace = std::make_shared<const moe::RouteTrace>(small_trace());
  const moe::RouteReplay want(*trace, n_expert, k);
  const std::filesystem::path file = process_temp_path("route_replay_test.jsonl");
  model::ModelConfig c = golden_config();
  c.cache_bytes = 2 * all_bytes;  // everything fits: a read is a first use
  c.route_replay = trace;
  c.route_trace = std::make_shared<moe::RouteTraceWriter>(file.string());
  auto m = load(path, c);
  const std::vector<int32_t> tokens = {5, 9, 17, 3, 3, 42, 7, 11, 5};  // 9 > 6: the trace wraps
  decode_all(*m, tokens);
  const model::ModelStats st = m->stats();
  c.route_trace->close();
  EXPECT_THAT(st.route_replay, HasSubstr("route replay: t.jsonl"));

  // What the mapped trace says: per (token, layer) its k experts; the first
  // use of a (layer, expert) is a read, every later use a hit.
  std::set<std::pair<int, int>> seen;
  uint64_t reads = 0, hits = 0;
  const moe::RouteTrace got = moe::read_route_trace(file.string());
  ASSERT_EQ(got.records.size(), tokens.size() * static_cast<size_t>(n_layer));
  for (size_t i = 0; i < got.records.size(); ++i) {
    const moe::RouteRecord& r = got.records[i];
    const uint64_t tok = i / static_cast<size_t>(n_layer);
    const int layer = static_cast<int>(i % static_cast<size_t>(n_layer));
    ASSERT_EQ(r.layer, layer);
    const std::vector<int> expect(want.experts(tok, layer), want.experts(tok, layer) + k);
    EXPECT_EQ(r.experts, expect) << "token " << tok << " layer " << layer;
    for (size_t s = 0; s < r.experts.size(); ++s) {
      const bool first = seen.insert({layer, r.experts[s]}).second;
      (first ? reads : hits) += 1;
      EXPECT_EQ(r.hit[s], !first);
    }
  }
  EXPECT_EQ(st.io.experts_read, reads);
  EXPECT_EQ(st.io.experts_hit, hits);
  EXPECT_EQ(st.experts.read, reads);
  EXPECT_EQ(st.experts.hit, hits);
  EXPECT_GT(hits, 0u);
  std::filesystem::remove(file);
}

TEST(RouteReplayEngine, LogitsDoNotDependOnThreadsOrTheCacheAndDifferFromTheRouter) {
  REQUIRE_SHARED(kModel);
  const std::string path = shared_path(kModel);
  auto trace = std::make_shared<const moe::RouteTrace>(small_trace());
  const std::vector<int32_t> tokens = {5, 9, 17, 3, 3, 42, 7};
  model::ModelConfig base = golden_config();
  base.route_replay = trace;
  base.threads = 1;
  auto a = load(path, base);
  const std::vector<float> want = decode_all(*a, tokens);
  model::ModelConfig other = base;
  other.threads = 2;
  other.io_threads = 1;
  other.cache_bytes = 64ull << 20;
  auto b = load(path, other);
  const std::vector<float> got = decode_all(*b, tokens);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  auto router = load(path, golden_config());
  const std::vector<float> own = decode_all(*router, tokens);
  EXPECT_NE(std::memcmp(own.data(), want.data(), own.size() * sizeof(float)), 0) << "the replay changed nothing";
}

TEST(RouteReplayEngine, ADenseModelIsAnErrorNamingTheFlag) {
  const char* dense = "golden/llama-dense-f16.gguf";
  if (!exists(shared_path(dense))) GTEST_SKIP() << shared_path(dense) << " not found";
  model::ModelConfig c = golden_config();
  c.route_replay = std::make_shared<const moe::RouteTrace>(small_trace());
  try {
    load(shared_path(dense), c);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--route-replay t.jsonl"));
    EXPECT_THAT(e.what(), HasSubstr("dense model"));
  }
}

}  // namespace
}  // namespace sluice::test
