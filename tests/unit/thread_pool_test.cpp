// ThreadPool: chunking contract (min_chunk), the spin-then-block wait paths,
// and reuse after idle periods longer than the spin budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "model/thread_pool.h"

namespace sluice::model {
namespace {

// Runs one parallel_for and returns the ranges fn was called with, sorted.
std::vector<std::pair<int64_t, int64_t>> ranges_of(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> r;
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        r.emplace_back(b, e);
      },
      min_chunk);
  std::sort(r.begin(), r.end());
  return r;
}

TEST(ThreadPool, RangesTileTheIndexSpaceAndRespectMinChunk) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 3, 4, 7, 8, 9, 33, 35, 100}) {
      for (int64_t min_chunk : {1, 4, 8, 16}) {
        const auto r = ranges_of(pool, n, min_chunk);
        ASSERT_FALSE(r.empty());
        int64_t next = 0;
        for (const auto& [b, e] : r) {
          EXPECT_EQ(b, next) << "n " << n << " threads " << threads;
          EXPECT_LT(b, e);
          // Every range holds min_chunk indices unless n itself is smaller.
          EXPECT_GE(e - b, std::min(n, min_chunk)) << "n " << n << " min_chunk " << min_chunk;
          // Ranges start at multiples of min_chunk (whole groups but the last).
          EXPECT_EQ(b % min_chunk, 0) << "n " << n << " min_chunk " << min_chunk << " threads " << threads;
          next = e;
        }
        EXPECT_EQ(next, n);
      }
    }
  }
}

TEST(ThreadPool, ChunkBoundariesDependOnlyOnSizeNotTiming) {
  ThreadPool pool(3);
  const auto first = ranges_of(pool, 1000, 1);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ranges_of(pool, 1000, 1), first);
  EXPECT_EQ(first.size(), 12u);  // 4 chunks per thread
}

TEST(ThreadPool, WorksAfterIdlePeriodsLongerThanTheSpin) {
  // Workers block after kSpinMicros: each call after a sleep must wake them
  // (a lost wake-up would hang here), and back-to-back calls use the spin path.
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 6; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(round % 2 ? 5 * ThreadPool::kSpinMicros : 10));
    for (int k = 0; k < 50; ++k)
      pool.parallel_for(64, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) sum += i;
      });
  }
  EXPECT_EQ(sum.load(), 6 * 50 * (63 * 64 / 2));
}

TEST(ThreadPool, CallerWaitsForSlowChunksThenRethrows) {
  // A slow chunk outlasts the caller's spin: the caller must block, be woken,
  // and still see every chunk's effect and the error.
  ThreadPool pool(2);
  std::atomic<int> done{0};
  EXPECT_THROW(pool.parallel_for(8,
                                 [&](int64_t b, int64_t) {
                                   if (b == 0) {
                                     std::this_thread::sleep_for(std::chrono::milliseconds(5));
                                     ++done;
                                     throw std::runtime_error("slow chunk failed");
                                   }
                                   ++done;
                                 }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 8);
}

}  // namespace
}  // namespace sluice::model
