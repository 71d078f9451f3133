// model_bench: configuration product, derived figures worked out by hand,
// exact markdown/CSV text, ceiling lookup from io-bench JSON, flag errors (the
// cgroup memory cap is util's, tested in proc_memory_test), the engine's --cache-mb /
// --moe-top-k checks before a sweep runs, and a tiny real run on the shared
// stories MoE model (no timing assertions).
#include "bench/model_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/uring_queue.h"
#include "moe/expert_usage.h"
#include "test_support.h"
#include "tools/repack.h"
#include "tools/synth.h"
#include "util/error.h"
#include "util/proc_memory.h"

namespace sluice::bench {
namespace SLUICE_TEST_FILE {

// Expects `fn` to throw sluice::Error whose message starts with `prefix`.
template <class Fn>
void expect_error_prefix(Fn fn, const std::string& prefix) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one starting with " << prefix;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
  }
}

// An io-bench ceiling as `sluice bench --io FILE -o json` writes it.
const char* kCeilingJson = R"([
  {"mode": "direct", "size_bytes": 1048576, "lanes": 1, "GBps": 0.5, "iops": 1.0, "lat_us_mean": 1.0,
   "lat_us_p50": 1.0, "lat_us_p99": 1.0},
  {"mode": "direct", "size_bytes": 1048576, "lanes": 4, "GBps": 2.0, "iops": 1.0, "lat_us_mean": 1.0,
   "lat_us_p50": 1.0, "lat_us_p99": 1.0},
  {"mode": "buffered", "size_bytes": 1048576, "lanes": 4, "GBps": 3.0, "iops": 1.0, "lat_us_mean": 1.0,
   "lat_us_p50": 1.0, "lat_us_p99": 1.0}
])";

// A row with round numbers: 2 reps x 4 decode tokens = 8 tokens, 3 MiB read
// per token in 1 MiB reads, 0.8 s decode wall, 0.4 s in pread over 4 lanes.
ModelBenchRow hand_row() {
  ModelBenchRow r;
  r.model = "m.gguf";
  r.point = {2, 4, "anon"};
  r.odirect = true;
  r.n_prompt = 16;
  r.n_gen = 4;
  r.reps = 2;
  r.prefill_tps = 100.5;
  r.prefill_tps_sd = 2.25;
  r.decode_tps = 10.0;
  r.decode_tps_sd = 0.5;
  r.decode_tokens = 8;
  r.decode_seconds = 0.8;
  r.decode_bytes_read = 8ull * 3 * 1048576;  // 25165824
  r.decode_reads = 24;
  r.decode_experts_read = 12;
  r.decode_experts_hit = 4;
  r.decode_io_seconds = 0.4;
  r.peak_rss_MiB = 123.456;
  r.point.moe_top_k = 0;
  r.point.cache_mb = "auto";
  r.moe_top_k = 8;
  r.cache_MiB = 5685;
  r.mem_cap_MiB = 8192;
  r.point.prefetch = "auto";
  r.prefetch_depth = 4;
  r.prefetch_precision_pct = 96.88;
  r.prefetch_coverage_pct = 48.44;
  r.prefill_prefetch_depth = 8;
  r.prefill_prefetch_coverage_pct = 90.0;
  r.prefill_stall_s = 1.5;
  r.prefill_matmul_s = 4.0;
  r.decode_stall_ms_per_tok = 2.5;
  r.decode_matmul_ms_per_tok = 40.0;
  return r;
}

// hand_row() as run uncapped with the cache off.
ModelBenchRow hand_row_uncached() {
  ModelBenchRow r = hand_row();
  r.point.cache_mb = "off";
  r.cache_MiB = 0;
  r.mem_cap_MiB = std::nan("");
  r.point.prefetch = "off";
  r.prefetch_depth = 0;
  r.prefetch_precision_pct = std::nan("");
  r.prefetch_coverage_pct = std::nan("");
  r.prefill_prefetch_depth = 0;
  r.prefill_prefetch_coverage_pct = std::nan("");
  return r;
}

// The trained stories MoE (top-2 of 8 experts) from ../shared, benched with
// n_prompt / n_gen / reps; every swept list at its default.
const char* const kStoriesRel = "models/stories-moe-8x-q8_0.gguf";
ModelBenchConfig stories_bench(int n_prompt, int n_gen, int reps) {
  ModelBenchConfig cfg;
  cfg.model_path = test::shared_path(kStoriesRel);
  cfg.n_prompt = n_prompt;
  cfg.n_gen = n_gen;
  cfg.reps = reps;
  return cfg;
}

TEST(ModelBenchConfig, ProductCountAndOrder) {
  ModelBenchConfig cfg;
  cfg.threads = {1, 2};
  cfg.io_threads = {1, 4, 8};
  cfg.dense_weights = {"anon", "mmap"};
  const std::vector<BenchPoint> pts = bench_points(cfg);
  ASSERT_EQ(pts.size(), 12u);
  // threads outermost, dense_weights innermost.
  EXPECT_EQ(pts[0].threads, 1);
  EXPECT_EQ(pts[0].io_threads, 1);
  EXPECT_EQ(pts[0].dense_weights, "anon");
  EXPECT_EQ(pts[1].dense_weights, "mmap");
  EXPECT_EQ(pts[1].io_threads, 1);
  EXPECT_EQ(pts[2].io_threads, 4);
  EXPECT_EQ(pts[5].io_threads, 8);
  EXPECT_EQ(pts[5].threads, 1);
  EXPECT_EQ(pts[6].threads, 2);
  EXPECT_EQ(pts[6].io_threads, 1);
  EXPECT_EQ(pts[11].threads, 2);
  EXPECT_EQ(pts[11].io_threads, 8);
  EXPECT_EQ(pts[11].dense_weights, "mmap");
  for (const BenchPoint& p : pts) {
    EXPECT_EQ(p.moe_top_k, 0);  // defaults: the model's k, cache off
    EXPECT_EQ(p.cache_mb, "off");
  }
}

TEST(ModelBenchConfig, ResidentLayoutSweepsInsideDenseWeights) {
  ModelBenchConfig cfg;
  cfg.dense_weights = {"anon", "mmap"};
  cfg.resident_layout = {"packed", "plain"};
  const std::vector<BenchPoint> pts = bench_points(cfg);
  ASSERT_EQ(pts.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"anon", "packed"}, {"anon", "plain"}, {"mmap", "packed"}, {"mmap", "plain"}};
  for (size_t i = 0; i < pts.size(); ++i)
    EXPECT_EQ(std::make_pair(pts[i].dense_weights, pts[i].resident_layout), want[i]) << "point " << i;
}

TEST(ModelBenchConfig, CacheAndTopKAreTheInnermostAxes) {
  ModelBenchConfig cfg;
  cfg.threads = {1, 2};
  cfg.moe_top_k = {4, 8};
  cfg.cache_mb = {"off", "2000", "auto"};
  const std::vector<BenchPoint> pts = bench_points(cfg);
  ASSERT_EQ(pts.size(), 12u);
  const std::vector<std::tuple<int, int, std::string>> want = {
      {1, 4, "off"}, {1, 4, "2000"}, {1, 4, "auto"}, {1, 8, "off"}, {1, 8, "2000"}, {1, 8, "auto"},
      {2, 4, "off"}, {2, 4, "2000"}, {2, 4, "auto"}, {2, 8, "off"}, {2, 8, "2000"}, {2, 8, "auto"}};
  for (size_t i = 0; i < pts.size(); ++i) {
    EXPECT_EQ(std::make_tuple(pts[i].threads, pts[i].moe_top_k, pts[i].cache_mb), want[i]) << "point " << i;
    EXPECT_EQ(pts[i].io_threads, 4);
    EXPECT_EQ(pts[i].dense_weights, "anon");
  }
  cfg.cache_mb.clear();
  EXPECT_TRUE(bench_points(cfg).empty());
}

TEST(ModelBenchConfig, PrefetchIsTheInnermostAxis) {
  ModelBenchConfig cfg;
  cfg.cache_mb = {"off", "auto"};
  cfg.prefetch = {"off", "3"};
  const std::vector<BenchPoint> pts = bench_points(cfg);
  ASSERT_EQ(pts.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"off", "off"}, {"off", "3"}, {"auto", "off"}, {"auto", "3"}};
  for (size_t i = 0; i < pts.size(); ++i)
    EXPECT_EQ(std::make_pair(pts[i].cache_mb, pts[i].prefetch), want[i]) << "point " << i;
  EXPECT_EQ(bench_points(ModelBenchConfig{})[0].prefetch, "off") << "off unless asked for";
}

TEST(ModelBenchConfig, PrefetchListIsParsedByTheEngine) {
  EXPECT_EQ(parse_prefetch_list("off,0,auto,3,007,prefill"),
            (std::vector<std::string>{"off", "off", "auto", "3", "7", "prefill"}));
  for (const char* bad : {"1,x", "on", "-2", "1,,2"}) {
    const std::string err = test::error_of([&] { parse_prefetch_list(bad); });
    EXPECT_EQ(err.rfind("--prefetch: ", 0), 0u) << bad << ": " << err;
  }
}

TEST(ModelBenchFigures, DerivedFromTotalsAndCeiling) {
  const std::vector<IoBenchRow> ceiling = parse_io_bench_json(kCeilingJson, "test");
  ASSERT_EQ(ceiling.size(), 3u);
  EXPECT_EQ(ceiling[2].mode, IoMode::Buffered);

  ModelBenchRow r = hand_row();
  derive_figures(r, ceiling);
  EXPECT_DOUBLE_EQ(r.mib_read_per_token, 3.0);
  EXPECT_DOUBLE_EQ(r.read_GBps, 25165824 / 0.8 / 1e9);
  EXPECT_DOUBLE_EQ(r.read_GBps_io, 25165824 / 0.1 / 1e9);
  EXPECT_DOUBLE_EQ(r.lane_busy_pct, 100.0 * (0.4 / 4) / 0.8);  // lane-seconds / lanes / wall
  EXPECT_DOUBLE_EQ(r.cache_hit_pct, 25.0);
  EXPECT_DOUBLE_EQ(r.read_size_bytes, 1048576.0);
  EXPECT_DOUBLE_EQ(r.ceiling_GBps, 2.0);  // direct, 4 lanes
  EXPECT_DOUBLE_EQ(r.io_efficiency, 0.25165824 / 2.0);
  // 10 tok/s at 0.003145728 GB/token against 2 GB/s: bound is 635.78 tok/s.
  EXPECT_DOUBLE_EQ(r.roofline_efficiency, 10.0 / (2.0 / (25165824 / 1e9 / 8)));

  ModelBenchRow lanes1 = hand_row();
  lanes1.point.io_threads = 1;
  derive_figures(lanes1, ceiling);
  EXPECT_DOUBLE_EQ(lanes1.ceiling_GBps, 0.5);

  ModelBenchRow buffered = hand_row();
  buffered.odirect = false;
  derive_figures(buffered, ceiling);
  EXPECT_DOUBLE_EQ(buffered.ceiling_GBps, 3.0);

  ModelBenchRow none = hand_row();
  derive_figures(none, {});
  EXPECT_TRUE(std::isnan(none.ceiling_GBps));
  EXPECT_TRUE(std::isnan(none.io_efficiency));
  EXPECT_TRUE(std::isnan(none.roofline_efficiency));

  // A mode the ceiling lacks is "no ceiling", not an error.
  ModelBenchRow buffered_only_ceiling = hand_row();
  derive_figures(buffered_only_ceiling, {ceiling[2]});
  EXPECT_TRUE(std::isnan(buffered_only_ceiling.ceiling_GBps));

  // Nothing read (all experts resident): no read size, no efficiency, no hit rate.
  ModelBenchRow resident = hand_row();
  resident.decode_bytes_read = resident.decode_reads = 0;
  resident.decode_experts_read = resident.decode_experts_hit = 0;
  resident.decode_io_seconds = 0;
  derive_figures(resident, ceiling);
  EXPECT_DOUBLE_EQ(resident.mib_read_per_token, 0.0);
  EXPECT_TRUE(std::isnan(resident.cache_hit_pct));
  EXPECT_TRUE(std::isnan(resident.io_efficiency));
}

TEST(ModelBenchFormat, MarkdownExact) {
  ModelBenchRow r = hand_row();
  derive_figures(r, parse_io_bench_json(kCeilingJson, "test"));
  const std::string md = format_bench_markdown({r});
  const std::string expected_head =
      "| model | threads | io-threads | dense | pp tok/s | tg tok/s | MiB/tok | read GB/s | read GB/s (io) | hit % "
      "| peak RSS MiB | io eff | roofline eff | top-k | cache | cache MiB | cap MiB | prefetch | pf prec % | pf cov % | lanes busy % "
      "| budget | experts/tok | mtp | mtp accept % | tok/forward | io engine | route replay | pp prefetch | pp pf cov % "
      "| pp stall ms | pp matmul ms | tg stall ms/tok | tg matmul ms/tok | layout | load | THP MiB |\n"
      "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
      "| m.gguf | 2 | 4 | anon | 100.50 ± 2.25 | 10.00 ± 0.50 | 3.00 | 0.031 | 0.252 | 25.0 | 123.5 | 12.6% | 1.6% "
      "| 8 | auto | 5685.0 | 8192.0 | 4 | 96.9 | 48.4 | 12.5 | 0 | 0.0 | 0 | 0.0 | 0.0 | pread | off | 8 | 90.0 | 1500.0 | 4000.0 | 2.5 | 40.0 | packed | 0.0 | 0.0 |\n";
  EXPECT_EQ(md.substr(0, expected_head.size()), expected_head);
  EXPECT_NE(md.find("> pp: 16-token random prompt; tg: 4 decode steps; 2 rep(s)"), std::string::npos) << md;

  ModelBenchRow no_ceiling = hand_row_uncached();
  no_ceiling.route_replay = "gsm8k_2_routing.jsonl";
  derive_figures(no_ceiling, {});
  const std::string md2 = format_bench_markdown({no_ceiling});
  EXPECT_NE(md2.find("| 123.5 | n/a | n/a | 8 | off | 0.0 | none | 0 | n/a | n/a | 12.5 | 0 | 0.0 | 0 | 0.0 | 0.0 "
                     "| pread | gsm8k_2_routing.jsonl | 0 | n/a | 1500.0 | 4000.0 | 2.5 | 40.0 | packed | 0.0 | 0.0 |\n"),
            std::string::npos)
      << md2;
}

TEST(ModelBenchFormat, CsvExact) {
  ModelBenchRow r = hand_row();
  derive_figures(r, parse_io_bench_json(kCeilingJson, "test"));
  ModelBenchRow n = hand_row_uncached();
  n.route_replay = "t.jsonl";
  n.point.resident_layout = "plain";
  derive_figures(n, {});
  // The original 22 columns keep their names and positions; the new ones follow.
  EXPECT_EQ(format_bench_csv({r, n}),
            "model,threads,io_threads,dense_weights,odirect,load_all,cold,n_prompt,n_gen,reps,prefill_tps,"
            "prefill_tps_sd,decode_tps,decode_tps_sd,mib_read_per_token,read_GBps,read_GBps_io,cache_hit_pct,"
            "peak_rss_MiB,ceiling_GBps,io_efficiency,roofline_efficiency,moe_top_k,cache,cache_MiB,mem_cap_MiB,prefetch,"
            "prefetch_prec_pct,prefetch_cov_pct,lane_busy_pct,expert_budget,experts_per_tok,mtp,mtp_accept_pct,tok_per_forward,io_engine,route_replay,"
            "prefill_prefetch,prefill_pf_cov_pct,prefill_stall_ms,prefill_matmul_ms,decode_stall_ms_tok,decode_matmul_ms_tok,resident_layout,load1,anon_huge_MiB\n"
            "m.gguf,2,4,anon,1,0,0,16,4,2,100.500,2.250,10.000,0.500,3.0000,0.0315,0.2517,25.00,123.5,2.0000,0.1258,"
            "0.0157,8,auto,5685.0,8192.0,4,96.9,48.4,12.5,0,0.0,0,0.0,0.0,pread,,8,90.0,1500.0,4000.0,2.5,40.0,packed,0.0,0.0\n"
            "m.gguf,2,4,anon,1,0,0,16,4,2,100.500,2.250,10.000,0.500,3.0000,0.0315,0.2517,25.00,123.5,,,,8,off,0.0,,0,,,12.5,0,0.0,0,0.0,0.0,pread,t.jsonl,0,,1500.0,4000.0,2.5,40.0,plain,0.0,0.0\n");
  // A model path with a comma or quote stays one field (RFC 4180 quoting).
  n.model = "runs/a,b \"q\".gguf";
  const std::string csv = format_bench_csv({n});
  EXPECT_NE(csv.find("\n\"runs/a,b \"\"q\"\".gguf\",2,4,anon,"), std::string::npos) << csv;
}

TEST(ModelBenchFormat, JsonNullsForMissing) {
  ModelBenchRow r = hand_row();
  derive_figures(r, {});
  const nlohmann::json j = nlohmann::json::parse(format_bench_json({r}));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_TRUE(j[0]["io_efficiency"].is_null());
  EXPECT_TRUE(j[0]["roofline_efficiency"].is_null());
  EXPECT_DOUBLE_EQ(j[0]["mib_read_per_token"].get<double>(), 3.0);
  EXPECT_EQ(j[0]["threads"].get<int>(), 2);
  EXPECT_EQ(j[0]["dense_weights"].get<std::string>(), "anon");
  EXPECT_EQ(j[0]["resident_layout"].get<std::string>(), "packed");
  EXPECT_EQ(j[0]["moe_top_k"].get<int>(), 8);
  EXPECT_EQ(j[0]["cache"].get<std::string>(), "auto");
  EXPECT_DOUBLE_EQ(j[0]["cache_MiB"].get<double>(), 5685.0);
  EXPECT_DOUBLE_EQ(j[0]["mem_cap_MiB"].get<double>(), 8192.0);
  EXPECT_EQ(j[0]["prefetch"].get<int>(), 4);
  EXPECT_DOUBLE_EQ(j[0]["prefetch_prec_pct"].get<double>(), 96.88);
  EXPECT_DOUBLE_EQ(j[0]["prefetch_cov_pct"].get<double>(), 48.44);
  EXPECT_DOUBLE_EQ(j[0]["lane_busy_pct"].get<double>(), 12.5);

  const nlohmann::json u = nlohmann::json::parse(format_bench_json({hand_row_uncached()}));
  EXPECT_EQ(u[0]["cache"].get<std::string>(), "off");
  EXPECT_DOUBLE_EQ(u[0]["cache_MiB"].get<double>(), 0.0);
  EXPECT_TRUE(u[0]["mem_cap_MiB"].is_null()) << "no cgroup limit is null, not 0";
}

TEST(ModelBenchCeiling, JsonErrorsNameTheSource) {
  expect_error_prefix([] { parse_io_bench_json("not json", "--io-ceiling x.json"); }, "--io-ceiling x.json: ");
  expect_error_prefix([] { parse_io_bench_json("{}", "--io-ceiling x.json"); }, "--io-ceiling x.json: ");
  expect_error_prefix([] { parse_io_bench_json("[]", "--io-ceiling x.json"); }, "--io-ceiling x.json: ");
  expect_error_prefix([] { parse_io_bench_json(R"([{"mode":"direct","lanes":1,"GBps":1}])", "f"); },
                      "f: row 0: missing \"size_bytes\"");
  expect_error_prefix(
      [] { parse_io_bench_json(R"([{"mode":"sideways","size_bytes":4096,"lanes":1,"GBps":1}])", "f"); },
      "f: row 0: unknown mode");
  expect_error_prefix([] { load_io_ceiling("/nonexistent/ceiling.json"); }, "--io-ceiling: ");
}

TEST(ModelBenchFlags, ListErrorsNameTheFlag) {
  EXPECT_EQ(parse_int_list("1,2, 8", "-t", 1, 64), (std::vector<int>{1, 2, 8}));
  EXPECT_EQ(parse_dense_list("anon,mmap", "--dense-weights"), (std::vector<std::string>{"anon", "mmap"}));
  expect_error_prefix([] { parse_int_list("1,,2", "-t", 1, 64); }, "-t: empty entry");
  expect_error_prefix([] { parse_int_list("two", "-t", 1, 64); }, "-t: 'two' is not an integer");
  expect_error_prefix([] { parse_int_list("4x", "--io-threads", 1, 64); }, "--io-threads: '4x' is not an integer");
  expect_error_prefix([] { parse_int_list("0", "--io-threads", 1, 64); }, "--io-threads: '0' is out of range");
  expect_error_prefix([] { parse_dense_list("anon,ram", "--dense-weights"); }, "--dense-weights: 'ram'");
  expect_error_prefix([] { parse_dense_list("anon,", "--dense-weights"); }, "--dense-weights: empty entry");
  EXPECT_EQ(parse_layout_list("packed,plain"), (std::vector<std::string>{"packed", "plain"}));
  expect_error_prefix([] { parse_layout_list("packed,tiled"); }, "--resident-layout: unknown layout 'tiled'");

  // --cache-mb: the engine's parser per entry, written canonically.
  EXPECT_EQ(parse_cache_mb_list("off,0, 1000 ,auto,0042"),
            (std::vector<std::string>{"off", "off", "1000", "auto", "42"}));
  EXPECT_EQ(parse_cache_mb_list("auto"), (std::vector<std::string>{"auto"}));
  expect_error_prefix([] { parse_cache_mb_list("1000,2G"); },
                      "--cache-mb: expected a whole number of MiB, 'auto' or 'off' (got '2G')");
  expect_error_prefix([] { parse_cache_mb_list("-5"); }, "--cache-mb: expected a whole number");
  expect_error_prefix([] { parse_cache_mb_list("0,,auto"); }, "--cache-mb: empty entry");

  ModelBenchConfig cfg;
  cfg.model_path = "/nonexistent.gguf";
  cfg.n_prompt = 0;
  expect_error_prefix([&] { run_model_bench(cfg); }, "-p: ");
  cfg.n_prompt = 4;
  cfg.n_gen = 0;
  expect_error_prefix([&] { run_model_bench(cfg); }, "-n: ");
  cfg.n_gen = 4;
  cfg.reps = 0;
  expect_error_prefix([&] { run_model_bench(cfg); }, "-r: ");
  cfg.reps = 1;
  cfg.dense_weights = {"ram"};
  expect_error_prefix([&] { run_model_bench(cfg); }, "--dense-weights");
  cfg.dense_weights = {"anon"};
  // Engine checks on every point before the model is even opened.
  cfg.moe_top_k = {4, -1};
  expect_error_prefix([&] { run_model_bench(cfg); }, "--moe-top-k");
  cfg.moe_top_k = {0};
  cfg.cache_mb = {"auto", "lots"};
  expect_error_prefix([&] { run_model_bench(cfg); }, "--cache-mb: expected a whole number");
  cfg.cache_mb = {};
  expect_error_prefix([&] { run_model_bench(cfg); }, "--cache-mb: no budgets given");
}

// ---- engine checks that need the model -----------------------------------------

// A small synthetic qwen3moe with experts big enough for a floor above 1 MiB:
// one layer, 8 experts of 3 x 512 x 1024 Q4_0 (864 KiB each), top-4, so the
// floor is 4 x 864 KiB = 3.375 MiB (reported as 4 MiB).
class ModelBenchFloor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (std::filesystem::temp_directory_path() /
             ("sluice_model_bench_floor_" + std::to_string(::getpid()) + ".gguf"))
                .string();
    tools::SynthConfig s = tools::synth_preset("tiny");
    s.n_layer = 1;
    s.n_expert = 8;
    s.n_expert_used = 4;
    s.n_embd = 512;
    s.n_ff_exp = 1024;
    tools::synth_model(s, path_, 2);
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }
  static std::string path_;
};
std::string ModelBenchFloor::path_;

TEST_F(ModelBenchFloor, FixedBudgetBelowTheFloorFailsBeforeAnyPointRuns) {
  const gguf::GgufModel g = gguf::GgufModel::open(path_);
  EXPECT_EQ(g.expert_range(g.require("blk.0.ffn_down_exps.weight"), 0).bytes, 294912u);  // 512 x 1024 x 18/32

  ModelBenchConfig cfg;
  cfg.model_path = path_;
  cfg.n_prompt = cfg.n_gen = cfg.reps = 1;
  int points_run = 0;
  cfg.on_progress = [&](const std::string& line) { points_run += line.rfind("config ", 0) == 0; };
  cfg.cache_mb = {"off", "auto", "3"};
  expect_error_prefix([&] { run_model_bench(cfg); }, "--cache-mb 3: below the mechanical floor of 4 MiB");
  cfg.moe_top_k = {4, 9};
  cfg.cache_mb = {"4"};
  expect_error_prefix([&] { run_model_bench(cfg); }, "--moe-top-k: top-k 9 is outside 1..8");
  EXPECT_EQ(points_run, 0);

  // --load-all turns the cache off, so no budget is checked against the floor (as in the engine).
  cfg.moe_top_k = {0};
  cfg.cache_mb = {"3"};
  cfg.load_all = true;
  const std::vector<ModelBenchRow> rows = run_model_bench(cfg);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].moe_top_k, 4);
  EXPECT_EQ(rows[0].point.cache_mb, "3");
  EXPECT_DOUBLE_EQ(rows[0].cache_MiB, 0.0);
  EXPECT_EQ(points_run, 1);
}

TEST(ModelBenchRun, TinyRealRunOnStories) {
  if (!test::shared_has(kStoriesRel)) GTEST_SKIP() << "missing " << test::shared_path(kStoriesRel);
  ModelBenchConfig cfg = stories_bench(16, 4, 2);
  cfg.threads = {1, 2};
  cfg.io_threads = {2};
  cfg.cold = true;
  cfg.ceiling = parse_io_bench_json(kCeilingJson, "test");
  const std::vector<ModelBenchRow> rows = run_model_bench(cfg);
  ASSERT_EQ(rows.size(), 2u);
  const std::optional<uint64_t> cap = process_cgroup_memory().limit;
  for (const ModelBenchRow& r : rows) {
    EXPECT_EQ(r.model, "stories-moe-8x-q8_0.gguf");
    EXPECT_TRUE(std::isfinite(r.prefill_tps) && r.prefill_tps > 0);
    EXPECT_TRUE(std::isfinite(r.decode_tps) && r.decode_tps > 0);
    EXPECT_TRUE(std::isfinite(r.prefill_tps_sd) && r.prefill_tps_sd >= 0);
    EXPECT_EQ(r.decode_tokens, 8u);
    EXPECT_GT(r.decode_bytes_read, 0u) << "experts stream from the file without --load-all";
    EXPECT_DOUBLE_EQ(r.mib_read_per_token, static_cast<double>(r.decode_bytes_read) / 1048576.0 / 8.0);
    EXPECT_GT(r.peak_rss_MiB, 0.0);
    // The closest ceiling row (any size in the hand-made file is 1 MiB) at 2 lanes: 4 lanes is nearer
    // than 1 by ratio (ties go larger), so the direct 4-lane row.
    EXPECT_DOUBLE_EQ(r.ceiling_GBps, 2.0);
    EXPECT_DOUBLE_EQ(r.io_efficiency, r.read_GBps_io / 2.0);
    EXPECT_GT(r.lane_busy_pct, 0.0);
    EXPECT_LE(r.lane_busy_pct, 100.0) << "a lane cannot be busy longer than the decode ran";
    EXPECT_EQ(r.prefetch_depth, 0) << "decode does not prefetch by default";
    EXPECT_TRUE(std::isnan(r.prefetch_precision_pct)) << "prefetch off: no precision";
    EXPECT_EQ(r.prefill_prefetch_depth, 0);
    EXPECT_TRUE(std::isnan(r.prefill_prefetch_coverage_pct)) << "no prefill prefetch: no coverage";
    EXPECT_GT(r.prefill_matmul_s, 0.0);
    EXPECT_GE(r.prefill_stall_s, 0.0);
    EXPECT_GT(r.decode_matmul_ms_per_tok, 0.0);
    EXPECT_GE(r.decode_stall_ms_per_tok, 0.0);
    EXPECT_EQ(r.moe_top_k, 2) << "the model's own top-2";
    EXPECT_EQ(r.point.cache_mb, "off");
    EXPECT_DOUBLE_EQ(r.cache_MiB, 0.0);
    if (cap) {
      EXPECT_DOUBLE_EQ(r.mem_cap_MiB, static_cast<double>(*cap) / 1048576.0);
    } else {
      EXPECT_TRUE(std::isnan(r.mem_cap_MiB));
    }
  }
  EXPECT_EQ(rows[0].point.threads, 1);
  EXPECT_EQ(rows[1].point.threads, 2);

  const nlohmann::json j = nlohmann::json::parse(format_bench_json(rows));
  ASSERT_EQ(j.size(), 2u);
  for (const char* key : {"prefill_tps", "decode_tps", "prefill_tps_sd", "decode_tps_sd", "mib_read_per_token",
                          "read_GBps", "read_GBps_io", "cache_hit_pct", "peak_rss_MiB", "io_efficiency",
                          "roofline_efficiency", "threads", "io_threads", "dense_weights", "n_prompt", "n_gen",
                          "reps", "moe_top_k", "cache", "cache_MiB", "mem_cap_MiB"}) {
    EXPECT_TRUE(j[0].contains(key)) << key;
  }
}

TEST(ModelBenchRun, PrefetchDepthsOnStories) {
  if (!test::shared_has(kStoriesRel)) GTEST_SKIP() << "missing " << test::shared_path(kStoriesRel);
  ModelBenchConfig cfg = stories_bench(8, 4, 1);
  cfg.prefetch = {"off", "auto", "9"};
  const std::vector<ModelBenchRow> rows = run_model_bench(cfg);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].prefetch_depth, 0);
  EXPECT_EQ(rows[1].prefetch_depth, 1) << "auto: half the top-2";
  EXPECT_EQ(rows[2].prefetch_depth, 2) << "capped at the top-2";
  for (int i : {1, 2}) {
    const ModelBenchRow& r = rows[static_cast<size_t>(i)];
    EXPECT_GE(r.prefetch_precision_pct, 0.0);
    EXPECT_LE(r.prefetch_precision_pct, 100.0);
    EXPECT_LE(r.prefetch_coverage_pct, 100.0 * r.prefetch_depth / 2) << "at most depth of the 2 needed per layer";
  }
  const nlohmann::json j = nlohmann::json::parse(format_bench_json(rows));
  EXPECT_EQ(j[1]["prefetch"].get<int>(), 1);
  EXPECT_TRUE(j[0]["prefetch_prec_pct"].is_null());
}

TEST(ModelBenchRun, CacheAndTopKSweepOnStories) {
  if (!test::shared_has(kStoriesRel)) GTEST_SKIP() << "missing " << test::shared_path(kStoriesRel);
  ModelBenchConfig cfg = stories_bench(8, 4, 2);
  cfg.moe_top_k = {1};
  cfg.cache_mb = {"off", "1", "auto"};
  const std::vector<ModelBenchRow> rows = run_model_bench(cfg);
  ASSERT_EQ(rows.size(), 3u);
  // Every expert of the model: 5 layers x 8 experts x (3 x 64 x 192 Q8_0 = 39168 bytes).
  const gguf::GgufModel g = gguf::GgufModel::open(cfg.model_path);
  EXPECT_EQ(g.expert_range(g.require("blk.0.ffn_up_exps.weight"), 0).bytes, 13056u);
  const double all_experts_mib = 5.0 * 8 * 39168 / 1048576.0;
  for (const ModelBenchRow& r : rows) EXPECT_EQ(r.moe_top_k, 1);
  EXPECT_EQ(rows[0].point.cache_mb, "off");
  EXPECT_DOUBLE_EQ(rows[0].cache_MiB, 0.0);
  EXPECT_DOUBLE_EQ(rows[0].cache_hit_pct, 0.0) << "nothing is served from memory without a cache";
  EXPECT_EQ(rows[1].point.cache_mb, "1");
  EXPECT_DOUBLE_EQ(rows[1].cache_MiB, 1.0);
  // auto: far more memory than the model, so the budget is capped at every expert, rounded up to
  // a whole MiB (1.494 -> 2).
  EXPECT_EQ(rows[2].point.cache_mb, "auto");
  EXPECT_DOUBLE_EQ(rows[2].cache_MiB, std::ceil(all_experts_mib));
  EXPECT_DOUBLE_EQ(rows[2].cache_MiB, 2.0);
  // Top-1 decode reads at most one expert per layer per token.
  for (const ModelBenchRow& r : rows) EXPECT_LE(r.decode_experts_read, 5u * r.decode_tokens);
  // With every expert fitting nothing is evicted. Per layer, rep 1's prefill touches >= 1 expert
  // and the two reps decode 8 tokens: >= 9 requests over 8 experts, so >= 1 decode hit per layer.
  EXPECT_GE(rows[2].decode_experts_hit, 5u);
}

// --route-replay: a one-token trace routes every position of every layer to
// trace expert 0, i.e. model experts 0..k-1 (group of k / 1): with a cache the
// prefill reads them once and every decode request hits; without one, every
// decode request is a read. Rows name the trace; uring reads the same experts.
TEST(ModelBenchRun, RouteReplayReadsOnlyTheTracesExperts) {
  if (!test::shared_has(kStoriesRel)) GTEST_SKIP() << "missing " << test::shared_path(kStoriesRel);
  const std::filesystem::path trace =
      std::filesystem::temp_directory_path() / ("sluice_bench_replay_" + std::to_string(::getpid()) + ".jsonl");
  {
    std::FILE* f = std::fopen(trace.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"pos\":0,\"layer\":0,\"experts\":[0]}\n", f);
    std::fclose(f);
  }
  ModelBenchConfig cfg = stories_bench(4, 6, 2);
  cfg.cache_mb = {"off", "auto"};
  cfg.prefetch = {"prefill"};  // replayed: the prompt's prefetch reads the next layer's replayed union
  cfg.route_replay = trace.string();
  const std::filesystem::path usage_file = trace.string() + ".usage.json";
  cfg.save_usage = usage_file.string();
  for (const char* engine : {"pread", "uring"}) {
    SCOPED_TRACE(engine);
    if (std::string(engine) == "uring" && !io::uring_available()) continue;  // e.g. a seccomp-filtered container
    cfg.io_engine = engine;
    const std::vector<ModelBenchRow> rows = run_model_bench(cfg);
    ASSERT_EQ(rows.size(), 2u);
    const int k = rows[0].moe_top_k;
    ASSERT_GT(k, 0);
    for (const ModelBenchRow& r : rows) {
      EXPECT_EQ(r.route_replay, trace.filename().string());
      EXPECT_EQ(r.decode_tokens, 12u);
      EXPECT_EQ(r.prefill_prefetch_depth, k);
    }
    // The replay predicts exactly: prefill's prefetch delivered every needed expert.
    EXPECT_DOUBLE_EQ(rows[0].prefill_prefetch_coverage_pct, 100.0);
    const uint64_t requests = 12u * 5u * static_cast<uint64_t>(k);  // tokens x layers x k
    EXPECT_EQ(rows[0].decode_experts_read, requests);  // cache off: every request reads
    EXPECT_EQ(rows[0].decode_experts_hit, 0u);
    EXPECT_EQ(rows[1].decode_experts_read, 0u);  // auto cache: the prefill read all 5 x k
    EXPECT_EQ(rows[1].decode_experts_hit, requests);
    // --save-usage: both points' positions (2 reps x (4 + 6)), each routed to experts 0..k-1 of every layer.
    const moe::ExpertUsage u = moe::read_expert_usage(usage_file.string(), "--cache-warm");
    ASSERT_EQ(u.n_layer, 5);
    EXPECT_EQ(u.tokens, 2u * 20u);
    for (int l = 0; l < u.n_layer; ++l)
      for (int e = 0; e < u.n_expert; ++e) EXPECT_EQ(u.count(l, e), e < k ? 40u : 0u) << l << " " << e;
  }
  std::filesystem::remove(trace);
  std::filesystem::remove(usage_file);
}

// The sweep's early floor check sizes experts the engine's way, so an
// expert-major (repacked) file benches like the stacked one it came from.
TEST(ModelBenchRun, RepackedModelWithAFixedCache) {
  if (!test::shared_has(kStoriesRel)) GTEST_SKIP() << "missing " << test::shared_path(kStoriesRel);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("sluice_bench_repack_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string repacked = (dir / "stories-expert-major.gguf").string();
  tools::repack_expert_major(test::shared_path(kStoriesRel), repacked);
  std::vector<ModelBenchRow> rows[2];
  for (int i = 0; i < 2; ++i) {
    ModelBenchConfig cfg = stories_bench(4, 3, 1);
    if (i == 1) cfg.model_path = repacked;
    cfg.cache_mb = {"off", "64"};
    rows[i] = run_model_bench(cfg);
  }
  std::filesystem::remove_all(dir);
  ASSERT_EQ(rows[0].size(), 2u);
  ASSERT_EQ(rows[1].size(), 2u);
  for (size_t j = 0; j < 2; ++j) {
    // Same routing, same experts fetched: the counts agree across layouts.
    EXPECT_EQ(rows[1][j].decode_experts_read, rows[0][j].decode_experts_read);
    EXPECT_EQ(rows[1][j].decode_experts_hit, rows[0][j].decode_experts_hit);
  }
  EXPECT_DOUBLE_EQ(rows[1][1].cache_MiB, 64.0);
  EXPECT_GT(rows[1][1].decode_experts_hit, 0u);
}

}  // namespace
}  // namespace sluice::bench

