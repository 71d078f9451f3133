// ThreadPool: chunking contract (min_chunk), the spin-then-block wait paths,
// and reuse after idle periods longer than the spin budget.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "model/thread_pool.h"
#include "test_support.h"
#include "util/error.h"

namespace sluice::model {
namespace SLUICE_TEST_FILE {

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

TEST(ThreadPool, CountOutsideLimitIsAnErrorNamingT) {
  const int limit = ThreadPool::max_threads();
  EXPECT_GE(limit, 4);
  EXPECT_EQ(limit % 4, 0);
  for (const int n : {0, -3, limit + 1, 100000}) {
    const std::string msg = test::error_of([n] { ThreadPool pool(n); });
    EXPECT_EQ(msg.rfind("-t: thread count must be 1.." + std::to_string(limit), 0), 0u) << msg;
    EXPECT_NE(msg.find("got " + std::to_string(n) + ")"), std::string::npos) << msg;
  }
  ThreadPool at_limit_is_fine(std::min(limit, 8));
  EXPECT_EQ(at_limit_is_fine.size(), std::min(limit, 8));
}

TEST(ThreadPool, ThreadStartFailureIsAnErrorAndJoinsStartedWorkers) {
  // The OS refuses the 4th thread (3rd worker): the constructor must throw an
  // Error (not hang, not std::terminate on joinable threads) after stopping
  // and joining the two workers that did start.
  std::atomic<int> started{0}, finished{0};
  const ThreadPool::StartThread start = [&](std::function<void()> body) {
    if (started.load() == 2) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    ++started;
    return std::thread([&finished, body = std::move(body)] {
      body();
      ++finished;
    });
  };
  const std::string msg = test::error_of([&] { ThreadPool pool(6, start); });
  EXPECT_EQ(msg.rfind("-t: cannot start compute thread 4 of 6: ", 0), 0u) << msg;
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(finished.load(), 2);  // joined before the throw
}

TEST(ThreadPool, InjectedStarterRunsWorkersNormally) {
  std::atomic<int> started{0};
  ThreadPool pool(3, [&](std::function<void()> body) {
    ++started;
    return std::thread(std::move(body));
  });
  EXPECT_EQ(started.load(), 2);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(ThreadPool, CliRejectsHugeThreadCountBeforeLoading) {
  // Finding: `-t 100000` used to hang in the pool's constructor. The CLI must
  // refuse it before opening the model (which does not exist here).
  int rc = 0;
  const std::string out = test::run_cmd(std::string(SLUICE_BINARY) +
                                            " run -m /nonexistent/sluice-no-model.gguf -p hi -t 100000 2>&1",
                                        &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(rc, -1) << "crashed: " << out;
  EXPECT_NE(out.find("-t: thread count must be 1.." + std::to_string(ThreadPool::max_threads())), std::string::npos)
      << out;
  EXPECT_NE(out.find("got 100000"), std::string::npos) << out;
  EXPECT_EQ(out.find("sluice-no-model"), std::string::npos) << out;
}

}  // namespace
}  // namespace sluice::model
