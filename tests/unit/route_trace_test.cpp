// Routing traces (writer/reader, the shared Mixtral and Qwen traces) and the
// cache simulator on hand-made traces with hand-worked hit counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "moe/cache_budget.h"
#include "moe/cache_sim.h"
#include "io/fault_file.h"
#include "moe/route_trace.h"
#include "test_support.h"
#include "util/error.h"

namespace sluice::moe {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using sluice::test::error_of;

RouteTrace parse(const std::string& text) {
  std::istringstream in(text);
  return parse_route_trace(in, "t.jsonl");
}

TEST(RouteTrace, WriterRoundTrip) {
  const fs::path path = fs::current_path() / ("route_trace_test_" + std::to_string(::getpid()) + ".jsonl");
  std::vector<RouteRecord> recs(3);
  recs[0] = {0, 0, 0, {7, 0}, {0.8003801107406616f, 0.19961987435817719f}, {false, false}};
  recs[1] = {0, 0, 1, {3, 5}, {0.625f, 0.375f}, {true, false}};
  recs[2] = {2, 41, 31, {1, 2, 3, 4}, {}, {}};
  {
    RouteTraceWriter w(path.string());
    for (const auto& r : recs) w.write(r);
    w.close();
  }
  const RouteTrace t = read_route_trace(path.string());
  fs::remove(path);
  EXPECT_EQ(t.format, "sluice");
  ASSERT_EQ(t.records.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.records[i].seq, recs[i].seq);
    EXPECT_EQ(t.records[i].pos, recs[i].pos);
    EXPECT_EQ(t.records[i].layer, recs[i].layer);
    EXPECT_EQ(t.records[i].experts, recs[i].experts);
    EXPECT_EQ(t.records[i].weights, recs[i].weights);  // float bits survive
    EXPECT_EQ(t.records[i].hit, recs[i].hit);
  }
  EXPECT_EQ(route_record_json(recs[1]), R"({"experts":[3,5],"hit":[true,false],"layer":1,"pos":0,"weights":[0.625,0.375]})");
  EXPECT_EQ(t.n_layers(), 32);
  EXPECT_EQ(t.max_top_k(), 4);
  EXPECT_EQ(t.n_expert(), 8);
  EXPECT_EQ(t.n_tokens(), 2u);  // (0,0) and (2,41)
  EXPECT_THAT(error_of([] { RouteTraceWriter w("/nonexistent-dir/x.jsonl"); }),
              AllOf(HasSubstr("/nonexistent-dir/x.jsonl"), HasSubstr("cannot create")));
}

TEST(RouteTrace, MalformedInputNamesFileAndLine) {
  EXPECT_THAT(error_of([] { parse("{\"pos\":0,\"layer\":0,\"experts\":[1]}\nnot json\n"); }),
              AllOf(HasSubstr("t.jsonl:2"), HasSubstr("not valid JSON")));
  EXPECT_THAT(error_of([] { parse(R"({"pos":0,"layer":0,"experts":[1,1]})"); }), HasSubstr("expert 1 twice"));
  EXPECT_THAT(error_of([] { parse(R"({"pos":0,"layer":-1,"experts":[1]})"); }), HasSubstr("\"layer\" = -1"));
  EXPECT_THAT(error_of([] { parse(R"({"pos":0,"layer":0,"experts":[1],"weights":[1,2]})"); }),
              HasSubstr("array of 1 numbers"));
  EXPECT_THAT(error_of([] { parse(R"({"pos":0,"layer":0,"experts":[1],"hit":[1]})"); }), HasSubstr("not a boolean"));
  // Found by route_trace_fuzz: 7.7e77 became inf as a float, which the writer
  // cannot store, so the record did not survive a round trip.
  EXPECT_THAT(error_of([] { parse(R"({"pos":0,"layer":0,"experts":[5,1],"weights":[0.71,7.7e77]})"); }),
              AllOf(HasSubstr("\"weights\" holds 7.7e+77"), HasSubstr("outside the range of a float")));
  EXPECT_THAT(error_of([] { parse(R"({"foo":1})"); }), HasSubstr("unrecognised routing record"));
  EXPECT_THAT(error_of([] {
                parse("{\"pos\":0,\"layer\":0,\"experts\":[1]}\n{\"type\":\"meta\"}\n");
              }),
              AllOf(HasSubstr("t.jsonl:2"), HasSubstr("qwen-moe record in a sluice trace")));
  EXPECT_THAT(error_of([] { parse("\n"); }), HasSubstr("no routing records"));
  EXPECT_THAT(error_of([] { read_route_trace("/nonexistent.jsonl"); }), HasSubstr("/nonexistent.jsonl"));
}

TEST(RouteTrace, ReadFaultsAreErrorsNamingTheFile) {
  // The reader goes through io::read_whole_file, so injected read faults end
  // in an Error naming the trace (and EINTR/short reads are retried).
  const fs::path path = fs::current_path() / ("route_trace_fault_" + std::to_string(::getpid()) + ".jsonl");
  {
    RouteTraceWriter w(path.string());
    w.write({0, 0, 0, {1, 2}, {0.5f, 0.5f}, {}});
    w.write({0, 1, 0, {3}, {1.0f}, {}});
    w.close();
  }
  const auto wrap = [](io::FaultPlan plan) -> io::WrapFile {
    return [plan](std::shared_ptr<const io::File> f) -> std::shared_ptr<const io::File> {
      return std::make_shared<io::FaultFile>(std::move(f), plan);
    };
  };
  io::FaultPlan flaky;
  flaky.max_bytes_per_raw = 7;
  flaky.eintr_every = 3;
  EXPECT_EQ(read_route_trace(path.string(), wrap(flaky)).records.size(), 2u);
  io::FaultPlan eio;
  eio.fail_read = 1;
  EXPECT_THAT(error_of([&] { read_route_trace(path.string(), wrap(eio)); }),
              AllOf(HasSubstr(path.string()), HasSubstr("Input/output error")));
  io::FaultPlan eof;
  eof.eof_at = 10;
  EXPECT_THAT(error_of([&] { read_route_trace(path.string(), wrap(eof)); }),
              AllOf(HasSubstr(path.string()), HasSubstr("unexpected end of file")));
  fs::remove(path);
}

TEST(RouteTrace, MixtralFormatIsReplayedTokenMajor) {
  // Two layers, layer 1 missing its token 1 (a dropped [0.5, 0.5] row, renumbered).
  const RouteTrace t = parse(
      R"({"dataset":"d","problem_id":0,"layer":0,"experts":[1,2],"gating_probs":[0.6,0.4],"token_idx":0}
{"dataset":"d","problem_id":0,"layer":0,"experts":[3,4],"gating_probs":[0.6,0.4],"token_idx":1}
{"dataset":"d","problem_id":0,"layer":0,"experts":[5,6],"gating_probs":[0.6,0.4],"token_idx":2}
{"dataset":"d","problem_id":0,"layer":1,"experts":[0,1],"gating_probs":[0.6,0.4],"token_idx":0}
{"dataset":"d","problem_id":0,"layer":1,"experts":[2,3],"gating_probs":[0.6,0.4],"token_idx":1}
{"dataset":"d","problem_id":1,"layer":0,"experts":[7,0],"gating_probs":[0.9,0.1],"token_idx":0}
)");
  EXPECT_EQ(t.format, "mixtral");
  std::vector<std::tuple<int, int64_t, int>> order;
  for (const auto& r : t.records) order.emplace_back(r.seq, r.pos, r.layer);
  EXPECT_THAT(order, ElementsAre(std::make_tuple(0, 0, 0), std::make_tuple(0, 0, 1), std::make_tuple(0, 1, 0),
                                 std::make_tuple(0, 1, 1), std::make_tuple(0, 2, 0), std::make_tuple(1, 0, 0)));
  EXPECT_THAT(t.records[3].experts, ElementsAre(2, 3));
  EXPECT_THAT(t.records[5].weights, ElementsAre(0.9f, 0.1f));
  EXPECT_EQ(t.n_tokens(), 4u);
}

TEST(RouteTrace, SharedMixtralTracesLoadWithReadmeCounts) {
  const std::string gsm = "data/routing/mixtral-8x7b/gsm8k_2_routing.jsonl";
  const std::string he = "data/routing/mixtral-8x7b/humaneval_2_routing.jsonl";
  if (!test::shared_has(gsm) || !test::shared_has(he)) GTEST_SKIP() << "shared Mixtral traces absent";
  const RouteTrace g = read_route_trace(test::shared_path(gsm));
  EXPECT_EQ(g.format, "mixtral");
  EXPECT_EQ(g.records.size(), 7889u);
  size_t p0 = 0;
  for (const auto& r : g.records) p0 += r.seq == 0;
  EXPECT_EQ(p0, 5366u);                 // problem 0; problem 1 has 2523
  EXPECT_EQ(g.n_tokens(), 168u + 79u);  // decode steps per problem
  EXPECT_EQ(g.n_layers(), 32);
  EXPECT_EQ(g.max_top_k(), 2);
  EXPECT_EQ(g.n_expert(), 8);
  // Token-major: the first 32 records are token 0 of layers 0..31; the
  // README's first row (problem 0, layer 0, token 0) routes to [7, 0].
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(g.records[static_cast<size_t>(l)].pos, 0);
    EXPECT_EQ(g.records[static_cast<size_t>(l)].layer, l);
  }
  EXPECT_THAT(g.records[0].experts, ElementsAre(7, 0));
  EXPECT_FLOAT_EQ(g.records[0].weights[0], 0.8003801107406616f);
  const RouteTrace h = read_route_trace(test::shared_path(he));
  EXPECT_EQ(h.records.size(), 10779u);
  EXPECT_EQ(h.n_tokens(), 83u + 255u);
}

TEST(RouteTrace, SharedAlignedAndQwenTracesLoad) {
  const std::string al = "data/routing/mixtral-8x7b/humaneval_p0_aligned_per_token.jsonl";
  const std::string qw = "data/routing/qwen1.5-moe-a2.7b/moe_routes.jsonl";
  if (!test::shared_has(al) || !test::shared_has(qw)) GTEST_SKIP() << "shared routing traces absent";
  const RouteTrace a = read_route_trace(test::shared_path(al));
  EXPECT_EQ(a.format, "mixtral-aligned");
  EXPECT_EQ(a.records.size(), 218u * 32 - 122 - 8);  // minus the README's null entries
  EXPECT_EQ(a.n_tokens(), 135u + 83u);
  EXPECT_EQ(a.records.back().pos, 135 + 82);
  const RouteTrace q = read_route_trace(test::shared_path(qw));
  EXPECT_EQ(q.format, "qwen-moe");
  EXPECT_EQ(q.records.size(), 18818u);
  EXPECT_EQ(q.records.back().seq, 105);  // 106 fused-MoE calls
  EXPECT_EQ(q.max_top_k(), 4);
  EXPECT_EQ(q.n_layers(), 1);
  EXPECT_THAT(q.records[0].experts, ElementsAre(43, 5, 7, 58));
}

// ---- simulator ----

// One layer, top-2, experts of 1 MiB; two sequences.
//   seq 0: [0 1] [1 2] [2 1] [3 0]    seq 1: [2 1] [0 3]
constexpr const char* kTiny =
    R"({"pos":0,"layer":0,"experts":[0,1]}
{"pos":1,"layer":0,"experts":[1,2]}
{"pos":2,"layer":0,"experts":[2,1]}
{"pos":3,"layer":0,"experts":[3,0]}
{"seq":1,"pos":0,"layer":0,"experts":[2,1]}
{"seq":1,"pos":1,"layer":0,"experts":[0,3]}
)";

TEST(CacheSim, TinyTraceExactCounts) {
  const std::vector<RouteTrace> traces = {parse(kTiny)};
  CacheSimOptions opt;
  opt.expert_bytes = kMiB;
  // Budget 2 experts, cold per sequence.
  //  seq 0: [0 1] mm ->{0,1}; [1 2] h m(evict 0) ->{1,2}; [2 1] hh; [3 0] mm (evict 1, 2)
  //  seq 1 (cold): [2 1] mm; [0 3] mm (evict 2, 1)
  CacheSimResult r = simulate_global_lru(traces, 2 * kMiB, opt);
  EXPECT_EQ(r.tokens, 6u);
  EXPECT_EQ(r.lookups, 12u);
  EXPECT_EQ(r.hits, 3u);
  EXPECT_EQ(r.misses, 9u);
  EXPECT_EQ(r.evictions, 5u);
  EXPECT_DOUBLE_EQ(r.mib_read_per_token(), 9.0 / 6.0);
  // Warm: seq 1 starts with {3,0}: [2 1] mm (evict 3, 0); [0 3] mm (evict 2, 1).
  opt.warm = true;
  r = simulate_global_lru(traces, 2 * kMiB, opt);
  EXPECT_EQ(r.hits, 3u);
  EXPECT_EQ(r.evictions, 7u);
  // Budget 3, cold. seq 0: [0 1] mm {0,1}; [1 2] h m {0,1,2}; [2 1] hh, order 0 2 1;
  // [3 0]: 0 hit (pinned, MRU) then 3 misses evicting 2 -> LRU order 1 0 3.
  // seq 1 cold: mm, mm (evict 2) -> 4 hits, 8 misses, 2 evictions.
  opt.warm = false;
  r = simulate_global_lru(traces, 3 * kMiB, opt);
  EXPECT_EQ(r.hits, 4u);
  EXPECT_EQ(r.misses, 8u);
  EXPECT_EQ(r.evictions, 2u);
  // The partitioned cache with one layer and K = 2 behaves like the global one.
  const CacheSimResult p = simulate_per_layer_lru(traces, 2, opt);
  EXPECT_EQ(p.hits, 3u);
  EXPECT_EQ(p.evictions, 5u);
  EXPECT_EQ(p.budget_bytes, 2 * kMiB);
  // Below the floor (2 experts at top-2) and below top-k: errors naming the flags.
  EXPECT_THAT(error_of([&] { simulate_global_lru(traces, kMiB, opt); }),
              AllOf(HasSubstr("--cache-mb 1"), HasSubstr("floor of 2 MiB")));
  EXPECT_THAT(error_of([&] { simulate_per_layer_lru(traces, 1, opt); }), HasSubstr("--per-layer 1"));
}

TEST(CacheSim, GlobalVersusPerLayerOnTwoLayers) {
  // Two layers, top-1, token-major: L0 a, L1 x, L0 b, L1 x, L0 a, L1 x.
  // Global budget 2: a, x, b(evict a), x hit, a(evict b), x hit -> 2 hits.
  // Per-layer K=1: layer 0 never hits, layer 1 hits twice -> 2 hits; K=2: + a -> 3 hits.
  const std::vector<RouteTrace> traces = {parse(
      R"({"pos":0,"layer":0,"experts":[0]}
{"pos":0,"layer":1,"experts":[5]}
{"pos":1,"layer":0,"experts":[1]}
{"pos":1,"layer":1,"experts":[5]}
{"pos":2,"layer":0,"experts":[0]}
{"pos":2,"layer":1,"experts":[5]}
)")};
  CacheSimOptions opt;
  opt.expert_bytes = 3 * kMiB;
  EXPECT_EQ(simulate_global_lru(traces, 6 * kMiB, opt).hits, 2u);
  EXPECT_EQ(simulate_global_lru(traces, 9 * kMiB, opt).hits, 3u);
  EXPECT_EQ(simulate_per_layer_lru(traces, 1, opt).hits, 2u);
  EXPECT_EQ(simulate_per_layer_lru(traces, 2, opt).hits, 3u);
  EXPECT_EQ(simulate_per_layer_lru(traces, 2, opt).budget_bytes, 12 * kMiB);
}

TEST(CacheSim, CliPrintsJson) {
  const fs::path path = fs::current_path() / ("cache_sim_cli_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kTiny, f);
    std::fclose(f);
  }
  const std::string cmd = std::string(SLUICE_BINARY) + " cache-sim --trace " + path.string() +
                          " --expert-mib 1 --cache-mb 2,3 --per-layer 2 --json 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = ::pclose(p);
  fs::remove(path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_THAT(out, AllOf(HasSubstr("\"hits\": 3"), HasSubstr("\"hits\": 4"), HasSubstr("\"policy\": \"per-layer\""),
                         HasSubstr("\"tokens\": 6")));
}

// Per-layer capacities are counted in experts: without an expert size the
// counts are the same and only the byte figures are unknown (0).
TEST(CacheSim, PerLayerNeedsNoExpertSize) {
  const std::vector<RouteTrace> traces = {parse(kTiny)};
  CacheSimOptions sized;
  sized.expert_bytes = kMiB;
  const CacheSimResult a = simulate_per_layer_lru(traces, 2, sized);
  const CacheSimResult b = simulate_per_layer_lru(traces, 2, CacheSimOptions{});
  EXPECT_EQ(b.hits, a.hits);
  EXPECT_EQ(b.misses, a.misses);
  EXPECT_EQ(b.evictions, a.evictions);
  EXPECT_EQ(b.budget_bytes, 0u);
  EXPECT_EQ(b.peak_bytes, 0u);
  EXPECT_EQ(b.mib_read_per_token(), 0.0);
  EXPECT_THAT(error_of([&] { simulate_global_lru(traces, 2 * kMiB, CacheSimOptions{}); }),
              HasSubstr("--expert-mib"));
}

TEST(CacheSim, CliReadsTheExpertSizeFromTheModel) {
  const fs::path path = fs::current_path() / ("cache_sim_model_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kTiny, f);
    std::fclose(f);
  }
  const std::string model = test::source_path("models/stories-moe-8x-q8_0.gguf");
  const std::string sim = "cache-sim --trace " + path.string() + " ";
  const test::CliResult per_layer = test::run_sluice(sim + "--per-layer 2 --json", "2>&1");
  const test::CliResult from_model = test::run_sluice(sim + "-m " + model + " --cache-mb 1 --per-layer 2 --json");
  const test::CliResult no_size = test::run_sluice(sim + "--cache-mb 1");
  const test::CliResult both = test::run_sluice(sim + "-m " + model + " --expert-mib 1 --per-layer 2");
  fs::remove(path);
  ASSERT_EQ(per_layer.status, 0) << per_layer.out;
  const nlohmann::json p = nlohmann::json::parse(per_layer.out);
  EXPECT_TRUE(p["expert_mib"].is_null());
  EXPECT_EQ(p["results"][0]["hits"], 3);
  EXPECT_TRUE(p["results"][0]["mib_read_per_token"].is_null());
  ASSERT_EQ(from_model.status, 0) << from_model.out;
  const nlohmann::json m = nlohmann::json::parse(from_model.out);
  // The bundled model's experts: gate, up and down slices of Q8_0 rows.
  uint64_t per_expert = 0;
  const gguf::GgufModel g = gguf::GgufModel::open(model);
  for (const auto& t : g.tensors())
    if (t.name.rfind("blk.0.ffn_", 0) == 0 && t.name.find("_exps") != std::string::npos) per_expert += t.bytes / t.ne[2];
  EXPECT_DOUBLE_EQ(m["expert_mib"].get<double>(), static_cast<double>(per_expert) / static_cast<double>(kMiB));
  EXPECT_EQ(m["results"][1]["hits"], 3);
  EXPECT_EQ(no_size.status, 1);
  EXPECT_THAT(no_size.out, HasSubstr("--cache-mb: a budget in MiB needs the expert size: give -m MODEL or --expert-mib X"));
  EXPECT_EQ(both.status, 2);
}

}  // namespace
}  // namespace sluice::moe
