// cache-sim's eviction policies (Bélády's MIN, LRU-2) and warm start from an
// expert-usage profile, on hand-made traces whose counts are worked by hand;
// MIN is a lower bound for the others on the real Mixtral trace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "moe/cache_budget.h"
#include "moe/cache_sim.h"
#include "moe/expert_usage.h"
#include "moe/route_trace.h"
#include "test_support.h"
#include "util/error.h"

namespace sluice::moe {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using sluice::test::error_of;

RouteTrace parse(const std::string& text) {
  std::istringstream in(text);
  return parse_route_trace(in, "t.jsonl");
}

// One layer, top-1: experts 0 1 2 0 1 3 0 1; the cache holds 2.
const char* kSeq = R"({"pos":0,"layer":0,"experts":[0]}
{"pos":1,"layer":0,"experts":[1]}
{"pos":2,"layer":0,"experts":[2]}
{"pos":3,"layer":0,"experts":[0]}
{"pos":4,"layer":0,"experts":[1]}
{"pos":5,"layer":0,"experts":[3]}
{"pos":6,"layer":0,"experts":[0]}
{"pos":7,"layer":0,"experts":[1]}
)";

CacheSimResult sim(SimPolicy p, std::vector<ExpertKey> warm = {}) {
  const std::vector<RouteTrace> traces = {parse(kSeq)};
  CacheSimOptions opt;
  opt.expert_bytes = kMiB;
  opt.warm_start = std::move(warm);
  return simulate_global(traces, 2 * kMiB, opt, p);
}

TEST(CachePolicy, LruMissesEveryAccessOfTheCyclicTrace) {
  // Each access evicts the expert needed next: 0 hits, 6 evictions.
  const CacheSimResult r = sim(SimPolicy::Lru);
  EXPECT_EQ(r.hits, 0u);
  EXPECT_EQ(r.misses, 8u);
  EXPECT_EQ(r.evictions, 6u);
  EXPECT_EQ(r.eviction, "lru");
}

TEST(CachePolicy, BeladyMinIsTheHandWorkedOptimum) {
  // 0m 1m; 2m evicts 1 (next use 4 > 0's 3); 0 hit; 1m evicts 2 (never used
  // again); 3m evicts 1 (next 7 > 0's 6); 0 hit; 1m evicts 0 or 3 (both never).
  const CacheSimResult r = sim(SimPolicy::Min);
  EXPECT_EQ(r.hits, 2u);
  EXPECT_EQ(r.misses, 6u);
  EXPECT_EQ(r.evictions, 4u);
  EXPECT_EQ(r.eviction, "min");
  EXPECT_EQ(r.peak_bytes, 2 * kMiB);
}

TEST(CachePolicy, Lru2EvictsByTheSecondMostRecentUse) {
  // Times 1..8. 2 evicts 0 (neither used twice; 0 used last longer ago);
  // 0 evicts 1; 1 evicts 2 (0 now has a second use); 3 evicts 0 (second use
  // 1 < 1's 2); 0 evicts 3 (used once); 1 hits.
  const CacheSimResult r = sim(SimPolicy::Lru2);
  EXPECT_EQ(r.hits, 1u);
  EXPECT_EQ(r.misses, 7u);
  EXPECT_EQ(r.evictions, 5u);
}

TEST(CachePolicy, WarmStartPreloadsTheMostUsedAsMostRecent) {
  // LRU preloaded with {0, 1}: 0 and 1 hit, then the cycle misses as before.
  const CacheSimResult r = sim(SimPolicy::Lru, {{0, 0}, {0, 1}, {0, 2}});
  EXPECT_EQ(r.preloaded, 2u);  // only two fit
  EXPECT_EQ(r.hits, 2u);
  EXPECT_EQ(r.misses, 6u);
  EXPECT_EQ(r.lookups, 8u);
  // MIN from the same start: 0 h, 1 h, 2m (evict 1), 0 h, 1m (evict 2), 3m (evict 1), 0 h, 1m.
  const CacheSimResult m = sim(SimPolicy::Min, {{0, 0}, {0, 1}});
  EXPECT_EQ(m.hits, 4u);
  EXPECT_EQ(m.misses, 4u);
}

TEST(CachePolicy, PinnedHitsAreNeverEvictedByMin) {
  // Top-2, capacity 2: [0 1], [0 2]: 2 must evict 1, whatever MIN would like
  // (0 is pinned by this record).
  const std::vector<RouteTrace> traces = {parse(R"({"pos":0,"layer":0,"experts":[0,1]}
{"pos":1,"layer":0,"experts":[0,2]}
{"pos":2,"layer":0,"experts":[1,2]}
)")};
  CacheSimOptions opt;
  opt.expert_bytes = kMiB;
  const CacheSimResult r = simulate_global(traces, 2 * kMiB, opt, SimPolicy::Min);
  EXPECT_EQ(r.hits, 2u);  // 0 at pos 1, 2 at pos 2
  EXPECT_EQ(r.misses, 4u);
}

TEST(CachePolicy, MinIsALowerBoundOnTheMixtralTrace) {
  const std::string path = sluice::test::shared_path("data/routing/mixtral-8x7b/humaneval_2_routing.jsonl");
  if (!fs::exists(path)) GTEST_SKIP() << path << " not found";
  const std::vector<RouteTrace> traces = {read_route_trace(path)};
  CacheSimOptions opt;
  opt.expert_bytes = kMiB;
  opt.warm = true;
  for (uint64_t experts : {64u, 96u, 128u, 192u}) {
    SCOPED_TRACE(std::to_string(experts) + " experts");
    const CacheSimResult lru = simulate_global(traces, experts * kMiB, opt, SimPolicy::Lru);
    const CacheSimResult lru2 = simulate_global(traces, experts * kMiB, opt, SimPolicy::Lru2);
    const CacheSimResult min = simulate_global(traces, experts * kMiB, opt, SimPolicy::Min);
    EXPECT_EQ(lru.lookups, min.lookups);
    EXPECT_EQ(lru2.lookups, min.lookups);
    EXPECT_LT(min.misses, lru.misses);
    EXPECT_LE(min.misses, lru2.misses);
  }
}

TEST(CachePolicy, UnknownPolicyAndPerLayerWarmStartAreErrorsNamingTheFlag) {
  EXPECT_THAT(error_of([] { parse_sim_policy("lfu"); }), HasSubstr("--policy: unknown eviction policy 'lfu'"));
  const std::vector<RouteTrace> traces = {parse(kSeq)};
  CacheSimOptions opt;
  opt.expert_bytes = kMiB;
  opt.warm_start = {{0, 0}};
  EXPECT_THAT(error_of([&] { simulate_per_layer_lru(traces, 2, opt); }), HasSubstr("--cache-warm"));
}

// The command line: --policy prints one row per (budget, policy); --model maps
// the trace onto a model (its expert size, top-k); errors name the flag.
TEST(CachePolicy, CliPoliciesAndModelMapping) {
  const fs::path path = fs::current_path() / ("cache_policy_cli_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kSeq, f);
    std::fclose(f);
  }
  int rc = 0;
  const std::string bin = SLUICE_BINARY;
  std::string out = sluice::test::run_cmd(bin + " cache-sim --trace " + path.string() +
                                              " --expert-mib 1 --cache-mb 2 --policy lru,lru-2,min --json 2>&1",
                                          &rc);
  EXPECT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["results"].size(), 3u);
  EXPECT_EQ(j["results"][0]["eviction"], "lru");
  EXPECT_EQ(j["results"][0]["hits"], 0);
  EXPECT_EQ(j["results"][1]["eviction"], "lru-2");
  EXPECT_EQ(j["results"][1]["hits"], 1);
  EXPECT_EQ(j["results"][2]["eviction"], "min");
  EXPECT_EQ(j["results"][2]["hits"], 2);
  out = sluice::test::run_cmd(bin + " cache-sim --trace " + path.string() + " --expert-mib 1 --cache-mb 2 --policy lfu 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, HasSubstr("--policy: unknown eviction policy 'lfu'"));
  out = sluice::test::run_cmd(bin + " cache-sim --trace " + path.string() + " --expert-mib 1 --cache-mb 2 --tokens 5 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_THAT(out, HasSubstr("--tokens: only applies with --replay-onto"));
  const std::string model = sluice::test::shared_path("golden/qwen3moe-q8_0-q4_0.gguf");
  if (fs::exists(model)) {
    // 8 replayed tokens of a one-layer top-1 trace onto every layer of the model.
    out = sluice::test::run_cmd(bin + " cache-sim --trace " + path.string() + " --replay-onto " + model +
                                    " --tokens 8 --cache-mb 64 --json 2>&1",
                                &rc);
    EXPECT_EQ(rc, 0) << out;
    const nlohmann::json m = nlohmann::json::parse(out);
    EXPECT_EQ(m["results"][0]["tokens"], 8);
    EXPECT_GT(m["expert_mib"].get<double>(), 0.0);
  }
  fs::remove(path);
}

TEST(ExpertUsage, RoundTripAndMostUsedFirst) {
  ExpertUsage u;
  u.model = "m.gguf";
  u.n_layer = 2;
  u.n_expert = 3;
  u.tokens = 7;
  u.counts = {5, 0, 2, 2, 9, 0};
  const fs::path path = fs::current_path() / ("usage_test_" + std::to_string(::getpid()) + ".json");
  write_expert_usage(u, path.string(), io::OutputOptions{.flag = "--save-usage", .inputs = {}});
  const ExpertUsage back = read_expert_usage(path.string(), "--cache-warm");
  EXPECT_EQ(back.model, "m.gguf");
  EXPECT_EQ(back.tokens, 7u);
  EXPECT_EQ(back.counts, u.counts);
  const std::vector<ExpertKey> order = back.by_use();
  ASSERT_EQ(order.size(), 4u);  // the two zeros are left out
  EXPECT_EQ(order[0], (ExpertKey{1, 1}));
  EXPECT_EQ(order[1], (ExpertKey{0, 0}));
  EXPECT_EQ(order[2], (ExpertKey{0, 2}));  // ties: lower layer first
  EXPECT_EQ(order[3], (ExpertKey{1, 0}));
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(R"({"format":"sluice-expert-usage","version":1,"n_layer":2,"n_expert":3,"tokens":1,"counts":[[1,2,3]]})", f);
    std::fclose(f);
  }
  EXPECT_THAT(error_of([&] { read_expert_usage(path.string(), "--cache-warm"); }),
              HasSubstr("--cache-warm " + path.string() + ": \"counts\" must hold 2 layers"));
  fs::remove(path);
  EXPECT_THAT(error_of([&] { read_expert_usage(path.string(), "--cache-warm"); }), HasSubstr("--cache-warm"));
}

}  // namespace
}  // namespace sluice::moe
