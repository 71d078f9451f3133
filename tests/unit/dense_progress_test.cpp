// DenseConfig::on_progress contract (moe/dense_weights.h): calls never overlap,
// `done` never decreases, the total is the same on every call, and the last
// call reports done == total — in every DenseMode.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "moe/dense_weights.h"
#include "test_support.h"

namespace SLUICE_TEST_FILE {

using sluice::moe::DenseMode;

struct Call {
  uint64_t done, total;
};

std::vector<Call> load_with_progress(const sluice::gguf::GgufModel& m, DenseMode mode, uint64_t* dense_bytes) {
  std::vector<Call> calls;
  std::atomic<int> inside{0};
  bool overlapped = false;
  sluice::moe::DenseConfig cfg;
  cfg.mode = mode;
  cfg.on_progress = [&](uint64_t done, uint64_t total) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    calls.push_back({done, total});
    inside.fetch_sub(1);
  };
  const sluice::moe::DenseWeights w(
      m, cfg, [](const sluice::gguf::TensorInfo& t) { return t.name.find("_exps.") != std::string::npos; });
  *dense_bytes = w.bytes();
  EXPECT_FALSE(overlapped) << "progress calls overlapped";
  return calls;
}

TEST(DenseLoadProgress, MonotoneAndEndsAtTotalInEveryMode) {
  const std::string rel = "models/stories-moe-8x-q8_0.gguf";
  if (!sluice::test::shared_has(rel)) GTEST_SKIP() << rel << " not present in " << SLUICE_SHARED_DIR;
  const auto m = sluice::gguf::GgufModel::open(sluice::test::shared_path(rel));
  for (DenseMode mode : {DenseMode::Anon, DenseMode::Warm, DenseMode::Mmap}) {
    SCOPED_TRACE(sluice::moe::dense_mode_name(mode));
    uint64_t dense_bytes = 0;
    const std::vector<Call> calls = load_with_progress(m, mode, &dense_bytes);
    ASSERT_FALSE(calls.empty());
    const uint64_t total = calls.front().total;
    // The total counts what is read or touched: at least the dense bytes
    // (anon reads whole aligned blocks around them).
    EXPECT_GE(total, dense_bytes);
    uint64_t prev = 0;
    for (const Call& c : calls) {
      EXPECT_EQ(c.total, total);
      EXPECT_GE(c.done, prev);
      EXPECT_LE(c.done, total);
      prev = c.done;
    }
    EXPECT_EQ(calls.back().done, total);
    // Exactly one call reports completion.
    size_t at_end = 0;
    for (const Call& c : calls) at_end += c.done == total;
    EXPECT_EQ(at_end, 1u);
  }
}

}  // namespace
