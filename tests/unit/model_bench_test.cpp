// model_bench: configuration product, derived figures worked out by hand,
// exact markdown/CSV text, ceiling lookup from io-bench JSON, flag errors, and a
// tiny real run on the shared stories MoE model (no timing assertions).
#include "runtime/model_bench.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"
#include "util/error.h"

namespace sluice::runtime {
namespace {

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
  return r;
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
      "| peak RSS MiB | io eff | roofline eff |\n"
      "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"
      "| m.gguf | 2 | 4 | anon | 100.50 ± 2.25 | 10.00 ± 0.50 | 3.00 | 0.031 | 0.252 | 25.0 | 123.5 | 12.6% | 1.6% |\n";
  EXPECT_EQ(md.substr(0, expected_head.size()), expected_head);
  EXPECT_NE(md.find("> pp: 16-token random prompt; tg: 4 decode steps; 2 rep(s)"), std::string::npos) << md;

  ModelBenchRow no_ceiling = hand_row();
  derive_figures(no_ceiling, {});
  const std::string md2 = format_bench_markdown({no_ceiling});
  EXPECT_NE(md2.find("| 123.5 | n/a | n/a |\n"), std::string::npos) << md2;
}

TEST(ModelBenchFormat, CsvExact) {
  ModelBenchRow r = hand_row();
  derive_figures(r, parse_io_bench_json(kCeilingJson, "test"));
  ModelBenchRow n = hand_row();
  derive_figures(n, {});
  EXPECT_EQ(format_bench_csv({r, n}),
            "model,threads,io_threads,dense_weights,odirect,load_all,cold,n_prompt,n_gen,reps,prefill_tps,"
            "prefill_tps_sd,decode_tps,decode_tps_sd,mib_read_per_token,read_GBps,read_GBps_io,cache_hit_pct,"
            "peak_rss_MiB,ceiling_GBps,io_efficiency,roofline_efficiency\n"
            "m.gguf,2,4,anon,1,0,0,16,4,2,100.500,2.250,10.000,0.500,3.0000,0.0315,0.2517,25.00,123.5,2.0000,0.1258,"
            "0.0157\n"
            "m.gguf,2,4,anon,1,0,0,16,4,2,100.500,2.250,10.000,0.500,3.0000,0.0315,0.2517,25.00,123.5,,,\n");
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
}

TEST(ModelBenchRun, TinyRealRunOnStories) {
  const std::string rel = "models/stories-moe-8x-q8_0.gguf";
  if (!test::shared_has(rel)) GTEST_SKIP() << "missing " << test::shared_path(rel);
  ModelBenchConfig cfg;
  cfg.model_path = test::shared_path(rel);
  cfg.n_prompt = 16;
  cfg.n_gen = 4;
  cfg.reps = 2;
  cfg.threads = {1, 2};
  cfg.io_threads = {2};
  cfg.cold = true;
  cfg.ceiling = parse_io_bench_json(kCeilingJson, "test");
  const std::vector<ModelBenchRow> rows = run_model_bench(cfg);
  ASSERT_EQ(rows.size(), 2u);
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
  }
  EXPECT_EQ(rows[0].point.threads, 1);
  EXPECT_EQ(rows[1].point.threads, 2);

  const nlohmann::json j = nlohmann::json::parse(format_bench_json(rows));
  ASSERT_EQ(j.size(), 2u);
  for (const char* key : {"prefill_tps", "decode_tps", "prefill_tps_sd", "decode_tps_sd", "mib_read_per_token",
                          "read_GBps", "read_GBps_io", "cache_hit_pct", "peak_rss_MiB", "io_efficiency",
                          "roofline_efficiency", "threads", "io_threads", "dense_weights", "n_prompt", "n_gen",
                          "reps"}) {
    EXPECT_TRUE(j[0].contains(key)) << key;
  }
}

}  // namespace
}  // namespace sluice::runtime
