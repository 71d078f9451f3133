// mem_bench: the probe's points, byte counts and errors, the roofline figure,
// exact output formats, and the CLI's --mem flags (no timing asserts).
#include "bench/mem_bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_support.h"
#include "tools/model_info.h"
#include "util/error.h"

namespace sluice::bench {
namespace SLUICE_TEST_FILE {

std::string error_of(const MemBenchConfig& cfg) {
  try {
    run_mem_bench(cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemBenchRun, OnePointPerThreadCountInOrderReadingWholeLines) {
  MemBenchConfig cfg;
  cfg.bytes = (4u << 20) + 100;  // the 100-byte tail is not a whole line: not read
  cfg.threads = {2, 1, 3};
  cfg.passes = 2;
  std::vector<int> reported;
  const std::vector<MemBenchRow> rows = run_mem_bench(cfg, [&](const MemBenchRow& r) { reported.push_back(r.threads); });
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(reported, (std::vector<int>{2, 1, 3}));
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].threads, cfg.threads[i]);
    EXPECT_EQ(rows[i].bytes, (4u << 20) + 64u);
    EXPECT_TRUE(std::isfinite(rows[i].GBps_best) && rows[i].GBps_best > 0) << rows[i].GBps_best;
    EXPECT_GE(rows[i].GBps_best, rows[i].GBps_median);
    EXPECT_GT(rows[i].GBps_median, 0);
  }
}

TEST(MemBenchRun, ConfigErrorsNameTheFlag) {
  MemBenchConfig cfg;
  cfg.bytes = 0;
  EXPECT_EQ(error_of(cfg), "--mem-size: must be above 0");
  cfg.bytes = 4096;
  cfg.threads = {1, 0};
  EXPECT_EQ(error_of(cfg), "-t: thread counts must be at least 1 (got 0)");
  cfg.threads = {};
  EXPECT_EQ(error_of(cfg), "-t: no thread counts given");
  cfg.threads = {1};
  cfg.passes = 0;
  EXPECT_EQ(error_of(cfg), "-r: the memory probe needs at least 1 pass (got 0)");
  cfg.passes = 1;
  cfg.bytes = 127;
  cfg.threads = {2};
  EXPECT_EQ(error_of(cfg), "--mem-size: 127 bytes give 2 threads less than one 64-byte line each");
}

TEST(MemBenchRoofline, BandwidthOverBytesPerToken) {
  EXPECT_DOUBLE_EQ(roofline_tokens_per_second(35.0, 1'750'000'000), 20.0);
  EXPECT_DOUBLE_EQ(roofline_tokens_per_second(35.0, 0), 0.0);
}

std::vector<MemBenchRow> two_rows() {
  return {{.threads = 1, .bytes = 1u << 30, .GBps_best = 18.0, .GBps_median = 17.5},
          {.threads = 2, .bytes = 1u << 30, .GBps_best = 35.0, .GBps_median = 34.25}};
}

TEST(MemBenchFormat, CsvExactWithAndWithoutAModel) {
  EXPECT_EQ(format_mem_bench(two_rows(), 1'750'000'000, "m.gguf", "csv"),
            "threads,bytes,GBps_best,GBps_median,decode_read_bytes,roofline_tps\n"
            "1,1073741824,18.000,17.500,1750000000,10.29\n"
            "2,1073741824,35.000,34.250,1750000000,20.00\n");
  EXPECT_EQ(format_mem_bench(two_rows(), 0, "", "csv"),
            "threads,bytes,GBps_best,GBps_median,decode_read_bytes,roofline_tps\n"
            "1,1073741824,18.000,17.500,,\n"
            "2,1073741824,35.000,34.250,,\n");
}

TEST(MemBenchFormat, JsonAndMarkdown) {
  const nlohmann::json j = nlohmann::json::parse(format_mem_bench(two_rows(), 1'750'000'000, "m.gguf", "json"));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1]["threads"], 2);
  EXPECT_EQ(j[1]["decode_read_bytes"], 1750000000u);
  EXPECT_DOUBLE_EQ(j[1]["roofline_tps"].get<double>(), 20.0);
  EXPECT_TRUE(nlohmann::json::parse(format_mem_bench(two_rows(), 0, "", "json"))[0]["roofline_tps"].is_null());
  const std::string md = format_mem_bench(two_rows(), 1'750'000'000, "m.gguf", "md");
  EXPECT_NE(md.find("| 2 | 35.00 | 34.25 | 20.00 |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("m.gguf reads 1.750 GB of weights per decode token"), std::string::npos) << md;
  const std::string plain = format_mem_bench(two_rows(), 0, "", "md");
  EXPECT_NE(plain.find("| 1 | 18.00 | 17.50 |\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("Roofline"), std::string::npos) << plain;
}

using sluice::test::run_cmd;

TEST(MemBenchCli, FlagErrorsAndCsvWithTheModelsRoofline) {
  const std::string bin = SLUICE_BINARY;
  int rc = 0;
  EXPECT_NE(run_cmd(bin + " bench --mem --mem-size 0 2>&1", &rc).find("--mem-size: size '0' must be at least 1 byte"),
            std::string::npos);
  EXPECT_EQ(rc, 1);
  // More than half the memory available (or, on a machine with terabytes, more than it can allocate).
  EXPECT_NE(run_cmd(bin + " bench --mem --mem-size 4000G 2>&1", &rc).find("sluice: error: --mem-size: "),
            std::string::npos);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(run_cmd(bin + " bench --mem --io /dev/null 2>&1", &rc).find("--mem and --io are two benchmarks"),
            std::string::npos);
  EXPECT_EQ(rc, 1);
  const std::string rel = "golden/qwen3moe-f32.gguf";
  if (!sluice::test::shared_has(rel)) GTEST_SKIP() << "shared model absent: " << sluice::test::shared_path(rel);
  const std::string model = sluice::test::shared_path(rel);
  const std::string csv =
      run_cmd(bin + " bench --mem --mem-size 8M -t 1,2 -r 2 -o csv -m " + model + " 2>/dev/null", &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(csv.rfind("threads,bytes,GBps_best,GBps_median,decode_read_bytes,roofline_tps\n", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("\n2,8388608,"), std::string::npos) << csv;
  // The roofline's numerator is inspect's figure for the same file.
  const uint64_t per_token = tools::model_info(gguf::GgufModel::open(model)).sizing.decode_read_bytes;
  ASSERT_GT(per_token, 0u);
  EXPECT_NE(csv.find("," + std::to_string(per_token) + ","), std::string::npos) << csv;
}

}  // namespace
}  // namespace sluice::bench
