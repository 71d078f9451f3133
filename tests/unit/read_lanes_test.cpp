// ReadLanes' two job classes: demand reads go before queued speculative ones,
// speculative reads run on at most half the lanes, and settle() promotes the
// needed guesses and drops the rest. A scripted File records the order of the
// reads and can hold a read until the test releases it.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io/file.h"
#include "moe/prediction_order.h"
#include "moe/read_lanes.h"
#include "util/error.h"

namespace sluice::moe {
namespace SLUICE_TEST_FILE {

using namespace std::chrono_literals;

// Reads at offset `hold` (and any offset >= kHoldFrom) block until release();
// every read records its offset when it starts.
class ScriptedFile final : public io::File {
 public:
  static constexpr uint64_t kHoldFrom = 1000;
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return 1 << 20; }
  void read_exact(void* dst, size_t n, uint64_t offset) const override {
    std::unique_lock<std::mutex> lk(mu_);
    started_.push_back(offset);
    ++running_;
    cv_.notify_all();
    if (offset >= kHoldFrom) cv_.wait(lk, [this] { return released_; });
    --running_;
    std::memset(dst, static_cast<int>(offset & 0xff), n);
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    released_ = true;
    cv_.notify_all();
  }
  // Waits (up to 10 s) until `n` reads have started; false on timeout.
  bool wait_started(size_t n) const {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, 10s, [&] { return started_.size() >= n; });
  }
  std::vector<uint64_t> started() const {
    std::lock_guard<std::mutex> lk(mu_);
    return started_;
  }
  int running() const {
    std::lock_guard<std::mutex> lk(mu_);
    return running_;
  }

 private:
  std::string path_ = "scripted";
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::vector<uint64_t> started_;
  mutable int running_ = 0;
  bool released_ = false;
};

// Releases the held reads when a test leaves, even through a failed ASSERT:
// declared after the ReadLanes, it runs before the lanes are joined.
struct ReleaseOnExit {
  ScriptedFile& f;
  ~ReleaseOnExit() { f.release(); }
};

// Records each job's report; done() waits for `n` of them.
class Owner final : public ReadOwner {
 public:
  void read_done(int item, uint64_t bytes, std::exception_ptr error) override {
    std::lock_guard<std::mutex> lk(mu_);
    reports_.push_back({item, bytes, error != nullptr, std::this_thread::get_id()});
    cv_.notify_all();
  }
  struct Report {
    int item;
    uint64_t bytes;
    bool error;
    std::thread::id thread;
  };
  std::vector<Report> wait_for(size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, 10s, [&] { return reports_.size() >= n; });
    return reports_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Report> reports_;
};

std::vector<ReadLanes::Job> jobs(const ScriptedFile& f, Owner& owner, std::vector<uint8_t>& buf,
                                 const std::vector<uint64_t>& offsets, int first_item = 0) {
  std::vector<ReadLanes::Job> out;
  for (size_t i = 0; i < offsets.size(); ++i)
    out.push_back({PlannedRead{&f, buf.data(), 16, offsets[i]}, &owner, first_item + static_cast<int>(i)});
  return out;
}

class ReadLanesPriority : public ::testing::TestWithParam<io::IoEngine> {
 protected:
  void SetUp() override {
    if (GetParam() == io::IoEngine::Uring && !io::uring_available()) GTEST_SKIP() << "this kernel gives no io_uring";
  }
};

TEST_P(ReadLanesPriority, DemandReadsGoBeforeQueuedSpeculativeOnes) {
  ScriptedFile f;
  Owner owner;
  std::vector<uint8_t> buf(16);
  LaneStats stats;
  {
    ReadLanes lanes(GetParam(), 1, 2, stats);  // one lane (uring: a depth of 2, reads of a non-fd file run in turn)
    ReleaseOnExit guard{f};
    lanes.submit(jobs(f, owner, buf, {ScriptedFile::kHoldFrom}));  // occupies the lane
    ASSERT_TRUE(f.wait_started(1));
    lanes.submit(jobs(f, owner, buf, {10, 11}, 1), ReadLanes::Priority::Speculative);
    lanes.submit(jobs(f, owner, buf, {20}, 3));
    f.release();
    ASSERT_EQ(owner.wait_for(4).size(), 4u);
  }
  EXPECT_EQ(f.started(), (std::vector<uint64_t>{ScriptedFile::kHoldFrom, 20, 10, 11}));
  EXPECT_EQ(stats.reads.load(), 4u);
}

TEST_P(ReadLanesPriority, SettlePromotesTheNeededGuessesAndDropsTheRest) {
  ScriptedFile f;
  Owner blocker, guesses;
  std::vector<uint8_t> buf(16);
  LaneStats stats;
  {
    ReadLanes lanes(GetParam(), 1, 2, stats);
    ReleaseOnExit guard{f};
    lanes.submit(jobs(f, blocker, buf, {ScriptedFile::kHoldFrom}));
    ASSERT_TRUE(f.wait_started(1));
    lanes.submit(jobs(f, guesses, buf, {10, 11, 12, 13}), ReadLanes::Priority::Speculative);
    lanes.submit(jobs(f, blocker, buf, {20}, 1), ReadLanes::Priority::Speculative);  // another owner's: kept
    lanes.settle(&guesses, [](int item) { return item % 2 == 0; });
    // The dropped ones are reported at once, on this thread, as cancelled.
    const std::vector<Owner::Report> dropped = guesses.wait_for(2);
    ASSERT_EQ(dropped.size(), 2u);
    for (const Owner::Report& r : dropped) {
      EXPECT_EQ(r.item % 2, 1);
      EXPECT_EQ(r.bytes, 0u);
      EXPECT_FALSE(r.error);
      EXPECT_EQ(r.thread, std::this_thread::get_id());
    }
    f.release();
    EXPECT_EQ(guesses.wait_for(4).size(), 4u);
    EXPECT_EQ(blocker.wait_for(2).size(), 2u);
  }
  // The needed guesses now run as demand reads, ahead of the other owner's guess.
  EXPECT_EQ(f.started(), (std::vector<uint64_t>{ScriptedFile::kHoldFrom, 10, 12, 20}));
}

INSTANTIATE_TEST_SUITE_P(Engines, ReadLanesPriority, ::testing::Values(io::IoEngine::Pread, io::IoEngine::Uring),
                         [](const auto& info) { return info.param == io::IoEngine::Pread ? "pread" : "uring"; });

TEST(ReadLanesPriority, SpeculativeReadsLeaveHalfTheLanesToDemand) {
  ScriptedFile f;
  Owner owner;
  std::vector<uint8_t> buf(16);
  LaneStats stats;
  ReadLanes lanes(4, stats);
  ReleaseOnExit guard{f};
  const uint64_t h = ScriptedFile::kHoldFrom;
  lanes.submit(jobs(f, owner, buf, {h, h + 1, h + 2, h + 3, h + 4}), ReadLanes::Priority::Speculative);
  ASSERT_TRUE(f.wait_started(2));
  std::this_thread::sleep_for(50ms);  // a third guess would have started by now
  EXPECT_EQ(f.running(), 2);
  // A demand read starts at once on a free lane, beside the two guesses.
  lanes.submit(jobs(f, owner, buf, {7}, 5));
  ASSERT_EQ(owner.wait_for(1).size(), 1u);
  EXPECT_EQ(owner.wait_for(1)[0].item, 5);
  f.release();
  EXPECT_EQ(owner.wait_for(6).size(), 6u);
  EXPECT_EQ(f.started().size(), 6u);
}

// The order a prefetch queues its guesses in (moe/prediction_order.h), worked
// out by hand: best slot first, then more positions, then the lower id.
TEST(PredictionOrder, BestSlotThenUsesThenId) {
  // Three positions, depth 3.
  const std::vector<int32_t> rows = {7, 2, 9,   // 7 @0, 2 @1, 9 @2
                                     4, 9, 2,   // 4 @0, 9 @1, 2 @2
                                     7, 5, 2};  // 7 @0, 5 @1, 2 @2
  const std::vector<PredictedExpert> o = order_predictions(rows, 3);
  // Slot 0: 7 (2 uses), 4 (1). Slot 1: 2 (3 uses), 9 (2), 5 (1).
  const std::vector<std::pair<int32_t, int>> want = {{7, 2}, {4, 1}, {2, 3}, {9, 2}, {5, 1}};
  ASSERT_EQ(o.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(o[i].expert, want[i].first) << i;
    EXPECT_EQ(o[i].uses, want[i].second) << i;
  }
  // Decode: one position, the router's slot order as it is.
  const std::vector<int32_t> one = {5, 1, 3};
  const std::vector<PredictedExpert> d = order_predictions(one, 3);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].expert, 5);
  EXPECT_EQ(d[1].expert, 1);
  EXPECT_EQ(d[2].expert, 3);
  EXPECT_TRUE(order_predictions({}, 2).empty());
  EXPECT_THROW(order_predictions(one, 2), Error);
  EXPECT_THROW(order_predictions(one, 0), Error);
}

}  // namespace
}  // namespace sluice::moe
