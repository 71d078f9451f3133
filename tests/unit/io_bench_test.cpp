// io_bench: offset generation, latency summaries, ceiling lookup, parsing,
// exact output formats, and small real runs on a temp file (no timing asserts).
#include "bench/io_bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/direct_reader.h"
#include "test_support.h"
#include "util/error.h"

namespace sluice::bench {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1ull << 20;

// An 8 MiB file of pseudo-random bytes, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(uint64_t bytes) {
    path_ = (fs::temp_directory_path() / ("sluice_io_bench_" + std::to_string(::getpid()) + "_" +
                                          std::to_string(counter_++) + ".bin"))
                .string();
    std::mt19937_64 rng(42);
    std::vector<uint64_t> words(bytes / 8);
    for (uint64_t& w : words) w = rng();
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(bytes));
  }
  ~TempFile() { fs::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

bool direct_supported(const std::string& path) { return io::open_fd_file(path, true) != nullptr; }

TEST(IoBenchOffsets, AlignedInsideFileAndDeterministic) {
  const uint64_t file_size = 8 * kMiB + 123;  // unaligned end: the last slot must still fit
  for (uint64_t read : {uint64_t{4096}, uint64_t{884736}, uint64_t{5000}, 8 * kMiB}) {
    RandomOffsets a(file_size, read, 7), b(file_size, read, 7), c(file_size, read, 8);
    const uint64_t last_slot = (file_size - read) / 4096;
    EXPECT_EQ(a.slots(), last_slot + 1);
    bool differs = false;
    std::set<uint64_t> seen;
    for (int i = 0; i < 20000; ++i) {
      const uint64_t off = a.next();
      EXPECT_EQ(off % 4096, 0u);
      ASSERT_LE(off + read, file_size) << "read " << read;
      EXPECT_EQ(off, b.next());  // same seed, same stream
      differs |= (off != c.next());
      seen.insert(off);
    }
    if (a.slots() > 1) {
      EXPECT_TRUE(differs);
      // Spread over the file: both the first and the last quarter of slots are hit.
      EXPECT_LT(*seen.begin(), a.slots() / 4 * 4096);
      EXPECT_GT(*seen.rbegin(), (a.slots() * 3 / 4) * 4096);
    } else {
      EXPECT_EQ(seen, std::set<uint64_t>{0});
    }
  }
}

TEST(IoBenchOffsets, SmallSlotCountHitsEverySlot) {
  RandomOffsets g(5 * 4096, 4096, 3);  // offsets 0..4*4096
  ASSERT_EQ(g.slots(), 5u);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(g.next());
  EXPECT_EQ(seen, (std::set<uint64_t>{0, 4096, 8192, 12288, 16384}));
}

TEST(IoBenchOffsets, RejectsReadLargerThanFileOrEmpty) {
  EXPECT_THROW(RandomOffsets(4096, 8192, 1), Error);
  EXPECT_THROW(RandomOffsets(4096, 0, 1), Error);
}

TEST(IoBenchLatency, NearestRankPercentiles) {
  std::vector<uint64_t> ns;
  for (uint64_t i = 100; i >= 1; --i) ns.push_back(i * 1000);  // 1..100 us, reversed
  const LatencySummary s = summarize_latencies(ns);
  EXPECT_DOUBLE_EQ(s.mean_us, 50.5);
  EXPECT_DOUBLE_EQ(s.p50_us, 50.0);  // 50th of 100
  EXPECT_DOUBLE_EQ(s.p99_us, 99.0);  // 99th of 100
  std::vector<uint64_t> three = {3000, 1000, 2000};
  const LatencySummary t = summarize_latencies(three);
  EXPECT_DOUBLE_EQ(t.p50_us, 2.0);  // ceil(1.5) = 2nd
  EXPECT_DOUBLE_EQ(t.p99_us, 3.0);  // ceil(2.97) = 3rd
  std::vector<uint64_t> none;
  EXPECT_DOUBLE_EQ(summarize_latencies(none).p99_us, 0.0);
}

TEST(IoBenchReadBytes, DirectRoundsUpToFourKiB) {
  EXPECT_EQ(io_read_bytes(IoMode::Direct, 1), 4096u);
  EXPECT_EQ(io_read_bytes(IoMode::Direct, 884736), 884736u);  // 216 * 4096
  EXPECT_EQ(io_read_bytes(IoMode::Direct, 884737), 888832u);
  EXPECT_EQ(io_read_bytes(IoMode::Buffered, 884737), 884737u);
}

IoBenchRow make_row(IoMode m, uint64_t size, int lanes, double gbps) {
  IoBenchRow r;
  r.mode = m;
  r.size_bytes = size;
  r.lanes = lanes;
  r.GBps = gbps;
  return r;
}

TEST(IoBenchCeiling, NearestSizeThenNearestLanes) {
  const std::vector<IoBenchRow> rows = {
      make_row(IoMode::Direct, 4096, 1, 0.1),     make_row(IoMode::Direct, 4096, 8, 0.8),
      make_row(IoMode::Direct, 1 * kMiB, 1, 1.0), make_row(IoMode::Direct, 1 * kMiB, 4, 2.0),
      make_row(IoMode::Direct, 1 * kMiB, 16, 3.0), make_row(IoMode::Buffered, 1 * kMiB, 4, 9.0),
  };
  EXPECT_DOUBLE_EQ(ceiling_GBps(rows, 1 * kMiB, 4, true), 2.0);   // exact point
  EXPECT_DOUBLE_EQ(ceiling_GBps(rows, 884736, 4, true), 2.0);     // nearest size is 1 MiB
  EXPECT_DOUBLE_EQ(ceiling_GBps(rows, 1 * kMiB, 12, true), 3.0);  // 12 is nearer 16 than 4 by ratio
  EXPECT_DOUBLE_EQ(ceiling_GBps(rows, 1 * kMiB, 2, true), 2.0);   // tie 1 vs 4 by ratio -> larger
  EXPECT_DOUBLE_EQ(ceiling_GBps(rows, 8192, 8, true), 0.8);
  EXPECT_DOUBLE_EQ(ceiling_GBps(rows, 4 * kMiB, 1, false), 9.0);  // the only buffered row
  EXPECT_THROW(ceiling_GBps({rows[0]}, 4096, 1, false), Error);
}

TEST(IoBenchBest, HighestGBpsPerModeAndSize) {
  const std::vector<IoBenchRow> rows = {
      make_row(IoMode::Direct, 4096, 1, 0.1), make_row(IoMode::Direct, 4096, 8, 0.8),
      make_row(IoMode::Direct, 4096, 16, 0.7), make_row(IoMode::Buffered, 4096, 1, 0.5),
  };
  const std::vector<IoBenchRow> best = best_rows(rows);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].lanes, 8);
  EXPECT_EQ(best[0].mode, IoMode::Direct);
  EXPECT_EQ(best[1].lanes, 1);
  EXPECT_EQ(best[1].mode, IoMode::Buffered);
}

TEST(IoBenchParse, Sizes) {
  EXPECT_EQ(parse_size("4096", "--sizes"), 4096u);
  EXPECT_EQ(parse_size("4K", "--sizes"), 4096u);
  EXPECT_EQ(parse_size("4kib", "--sizes"), 4096u);
  EXPECT_EQ(parse_size(" 1M ", "--sizes"), kMiB);
  EXPECT_EQ(parse_size("2.5M", "--sizes"), 2621440u);
  EXPECT_EQ(parse_size("864K", "--sizes"), 884736u);
  EXPECT_EQ(parse_size("1G", "--sizes"), 1ull << 30);
  EXPECT_EQ(parse_size_list("4K,64K, 1M", "--sizes"), (std::vector<uint64_t>{4096, 65536, kMiB}));
  for (const char* bad : {"12Q", "", "K", "1.2.3M", "-4K", "0", "0.1", "4K,", "2T"}) {
    EXPECT_THROW(parse_size_list(bad, "--sizes"), Error) << bad;
  }
  try {
    parse_size("12Q", "--sizes");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--sizes: '12Q' is not a size"), std::string::npos) << e.what();
  }
}

TEST(IoBenchParse, Lanes) {
  EXPECT_EQ(parse_lane_list("1,2,4,8,16", "--lanes"), (std::vector<int>{1, 2, 4, 8, 16}));
  for (const char* bad : {"0", "1,0", "-1", "x", "2,,4", "1025", "1.5"}) {
    EXPECT_THROW(parse_lane_list(bad, "--lanes"), Error) << bad;
  }
  try {
    parse_lane_list("0", "--lanes");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--lanes: lane count 0 is out of range (1..1024)");
  }
}

TEST(IoBenchFormat, SizeLabels) {
  EXPECT_EQ(format_size(123), "123 B");
  EXPECT_EQ(format_size(4096), "4 KiB");
  EXPECT_EQ(format_size(884736), "864 KiB");
  EXPECT_EQ(format_size(2654208), "2.53 MiB");
  EXPECT_EQ(format_size(4ull << 30), "4 GiB");
}

IoBenchRow hand_row() {
  IoBenchRow r;
  r.mode = IoMode::Buffered;
  r.size_bytes = 884736;
  r.lanes = 8;
  r.GBps = 2.5;
  r.iops = 2825.625;
  r.lat_us_mean = 2831.1234;
  r.lat_us_p50 = 2700.5;
  r.lat_us_p99 = 9001.999;
  return r;
}

TEST(IoBenchFormat, JsonExact) {
  IoBenchRow d = hand_row();
  d.mode = IoMode::Direct;
  d.size_bytes = 4096;
  d.lanes = 1;
  d.GBps = 0.05;
  d.iops = 12207.03125;
  d.lat_us_mean = 81.0;
  d.lat_us_p50 = 75.25;
  d.lat_us_p99 = 140.0;
  IoBenchRow u = hand_row();
  u.engine = io::IoEngine::Uring;
  // Rounded (GB/s 4 places, IOPS 1, latency 2), keys in column order, written by nlohmann-json.
  const std::string text = format_io_json({d, u});
  EXPECT_EQ(nlohmann::json::parse(text), nlohmann::json::parse(R"([
    {"mode": "direct", "size_bytes": 4096, "lanes": 1, "GBps": 0.05, "iops": 12207.0,
     "lat_us_mean": 81.0, "lat_us_p50": 75.25, "lat_us_p99": 140.0, "engine": "pread"},
    {"mode": "buffered", "size_bytes": 884736, "lanes": 8, "GBps": 2.5, "iops": 2825.6,
     "lat_us_mean": 2831.12, "lat_us_p50": 2700.5, "lat_us_p99": 9002.0, "engine": "uring"}])"));
  EXPECT_EQ(text.rfind("[\n  {\n    \"mode\": \"direct\",\n    \"size_bytes\": 4096,\n", 0), 0u) << text;
  EXPECT_EQ(format_io_json({}), "[]\n");
}

TEST(IoBenchFormat, CsvExact) {
  EXPECT_EQ(format_io_csv({hand_row()}),
            "mode,size_bytes,lanes,GBps,iops,lat_us_mean,lat_us_p50,lat_us_p99,engine\n"
            "buffered,884736,8,2.5000,2825.6,2831.12,2700.50,9002.00,pread\n");
}

TEST(IoBenchFormat, MarkdownHasRowBestLineAndNotes) {
  IoBenchRow slow = hand_row();
  slow.lanes = 1;
  slow.GBps = 1.0;
  IoBenchRow single = hand_row();
  single.mode = IoMode::Direct;
  single.lanes = 1;
  const std::string md = format_io_markdown({slow, hand_row(), single}, {"file is small"});
  EXPECT_NE(md.find("best direct 864 KiB: 1 lane, 2.500 GB/s\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| buffered | 864 KiB | 884736 | 8 | 2.500 | 2826 | 2831.1 | 2700.5 | 9002.0 | pread |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("best buffered 864 KiB: 8 lanes, 2.500 GB/s\n"), std::string::npos) << md;
  EXPECT_NE(md.find("> note: file is small\n"), std::string::npos) << md;
}

TEST(IoBenchRun, RowForEveryPointAndConsistentCounts) {
  TempFile file(8 * kMiB);
  IoBenchConfig cfg;
  cfg.path = file.path();
  cfg.sizes = {4096, 5000, 1 * kMiB};
  cfg.lanes = {1, 3};
  cfg.seconds_per_point = 0.01;
  const bool direct = direct_supported(file.path());
  cfg.modes = direct ? std::vector<IoMode>{IoMode::Direct, IoMode::Buffered} : std::vector<IoMode>{IoMode::Buffered};
  int callbacks = 0;
  cfg.on_row = [&](const IoBenchRow&) { ++callbacks; };
  const std::vector<IoBenchRow> rows = run_io_bench(cfg);
  ASSERT_EQ(rows.size(), cfg.modes.size() * 3 * 2);
  EXPECT_EQ(callbacks, static_cast<int>(rows.size()));
  size_t i = 0;
  for (IoMode m : cfg.modes) {
    for (uint64_t s : cfg.sizes) {
      for (int l : cfg.lanes) {
        const IoBenchRow& r = rows[i++];
        EXPECT_EQ(r.mode, m);
        EXPECT_EQ(r.size_bytes, s);
        EXPECT_EQ(r.lanes, l);
        EXPECT_EQ(r.read_bytes, io_read_bytes(m, s));
        EXPECT_GE(r.reads, static_cast<uint64_t>(l));  // every lane completes at least one read
        EXPECT_EQ(r.bytes, r.reads * r.read_bytes);
        ASSERT_GT(r.seconds, 0.0);
        EXPECT_NEAR(r.GBps * 1e9 * r.seconds, double(r.bytes), 1e-6 * double(r.bytes));
        EXPECT_NEAR(r.iops * r.seconds, double(r.reads), 1e-6 * double(r.reads));
        EXPECT_GT(r.lat_us_mean, 0.0);
        EXPECT_LE(r.lat_us_p50, r.lat_us_p99);
      }
    }
  }
  if (!direct) GTEST_SKIP() << "O_DIRECT refused on " << file.path() << "; only buffered rows checked";
}

TEST(IoBenchRun, ByteBudgetStopsAtExactReadCount) {
  TempFile file(8 * kMiB);
  IoBenchConfig cfg;
  cfg.path = file.path();
  cfg.sizes = {65536, 100000};
  cfg.lanes = {1, 4};
  cfg.modes = {IoMode::Buffered};
  cfg.seconds_per_point = 600;  // the budget, not the clock, ends each point
  cfg.max_bytes_per_point = 1 * kMiB;
  const std::vector<IoBenchRow> rows = run_io_bench(cfg);
  ASSERT_EQ(rows.size(), 4u);
  for (const IoBenchRow& r : rows) {
    const uint64_t expected = (kMiB + r.read_bytes - 1) / r.read_bytes;  // ceil(budget / read)
    EXPECT_EQ(r.reads, expected) << r.size_bytes << " x" << r.lanes;
  }
}

// --io-engine uring: one thread with `lanes` reads in flight; the byte budget
// ends a point after exactly ceil(budget / read) reads, as with pread lanes.
TEST(IoBenchRun, UringByteBudgetStopsAtExactReadCount) {
  if (!io::uring_available()) GTEST_SKIP() << "this kernel gives no io_uring";
  TempFile file(8 * kMiB);
  IoBenchConfig cfg;
  cfg.path = file.path();
  cfg.sizes = {65536, 100000};
  cfg.lanes = {1, 4, 64};
  cfg.engine = io::IoEngine::Uring;
  cfg.modes = direct_supported(file.path()) ? std::vector<IoMode>{IoMode::Direct, IoMode::Buffered}
                                            : std::vector<IoMode>{IoMode::Buffered};
  cfg.seconds_per_point = 600;
  cfg.max_bytes_per_point = 1 * kMiB;
  const std::vector<IoBenchRow> rows = run_io_bench(cfg);
  ASSERT_EQ(rows.size(), cfg.modes.size() * 6);
  for (const IoBenchRow& r : rows) {
    EXPECT_EQ(r.engine, io::IoEngine::Uring);
    EXPECT_EQ(r.reads, (kMiB + r.read_bytes - 1) / r.read_bytes) << r.size_bytes << " x" << r.lanes;
    EXPECT_EQ(r.bytes, r.reads * r.read_bytes);
    EXPECT_LE(r.lat_us_p50, r.lat_us_p99);
  }
}

TEST(IoBenchRun, ConfigAndFileErrors) {
  TempFile file(64 * 1024);
  IoBenchConfig cfg;
  cfg.path = file.path();
  cfg.sizes = {4096};
  cfg.lanes = {1};
  cfg.modes = {IoMode::Buffered};
  cfg.seconds_per_point = 0.001;
  IoBenchConfig c = cfg;
  c.lanes = {0};
  EXPECT_THROW(run_io_bench(c), Error);
  c = cfg;
  c.sizes = {0};
  EXPECT_THROW(run_io_bench(c), Error);
  c = cfg;
  c.sizes = {128 * 1024};  // larger than the file
  try {
    run_io_bench(c);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.path()), std::string::npos) << e.what();
  }
  c = cfg;
  c.path = file.path() + ".missing";
  EXPECT_THROW(run_io_bench(c), Error);
  c = cfg;
  c.seconds_per_point = 0;
  EXPECT_THROW(run_io_bench(c), Error);
}

TEST(IoBenchNotes, SmallFileIsFlaggedForBufferedOnly) {
  TempFile file(64 * 1024);
  IoBenchConfig cfg;
  cfg.path = file.path();
  cfg.sizes = {4096};
  cfg.modes = {IoMode::Buffered};
  auto mentions_ram = [](const std::vector<std::string>& notes) {
    for (const std::string& n : notes)
      if (n.find("smaller than RAM") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(mentions_ram(io_bench_notes(cfg)));
  cfg.modes = {IoMode::Direct};
  EXPECT_FALSE(mentions_ram(io_bench_notes(cfg)));
}

TEST(IoBenchModel, ExpertSliceSizesOfSharedModel) {
  const std::string path = test::shared_path("models/stories-moe-8x-q8_0.gguf");
  if (!fs::exists(path)) GTEST_SKIP() << "shared model absent: " << path;
  const gguf::GgufModel model = gguf::GgufModel::open(path);
  std::set<uint64_t> expected;
  for (const gguf::TensorInfo& t : model.tensors()) {
    if (t.ne.size() == 3 && t.name.find("_exps") != std::string::npos) expected.insert(t.bytes / t.ne[2]);
  }
  ASSERT_FALSE(expected.empty()) << "model has no stacked expert tensors";
  const std::vector<uint64_t> sizes = expert_slice_sizes(model);
  EXPECT_EQ(sizes, std::vector<uint64_t>(expected.begin(), expected.end()));
}

using sluice::test::run_cmd;

TEST(IoBenchCli, FlagErrorsAndCsvOutput) {
  TempFile file(1 * kMiB);
  const std::string bin = SLUICE_BINARY;
  int rc = 0;
  EXPECT_NE(run_cmd(bin + " bench 2>&1", &rc).find("choose a mode"), std::string::npos);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(run_cmd(bin + " bench --io " + file.path() + " --sizes 12Q 2>&1", &rc).find("'12Q' is not a size"),
            std::string::npos);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(run_cmd(bin + " bench --io " + file.path() + " --lanes 0 2>&1", &rc).find("lane count 0"),
            std::string::npos);
  EXPECT_EQ(rc, 1);
  const std::string csv = run_cmd(bin + " bench --io " + file.path() +
                                      " --buffered --sizes 4K,8K --lanes 1,2 --seconds 0.01 -o csv 2>/dev/null",
                                  &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(csv.rfind("mode,size_bytes,lanes,GBps,iops,lat_us_mean,lat_us_p50,lat_us_p99,engine\n", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);  // header + 2 sizes x 2 lane counts
  EXPECT_NE(csv.find("\nbuffered,8192,2,"), std::string::npos) << csv;
}

}  // namespace
}  // namespace sluice::bench
