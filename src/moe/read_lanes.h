// ReadLanes — the expert store's persistent pool of read threads.
//
// Jobs are positional reads into caller-owned memory. Each job names a
// ReadOwner that is told when the job finishes (with the error, if any). The
// owner must stay alive until it has been told about every job it submitted;
// Batch and the load_all latch guarantee that by waiting in their destructors.
//
// Engines (io::IoEngine): Pread runs n_lanes threads, each doing one blocking
// read_exact at a time. Uring runs one thread that keeps up to `depth` reads
// in flight through an io_uring (files that are not a plain descriptor, e.g.
// fault-injecting wrappers in tests, are read with read_exact on that thread);
// a short read is re-issued for its remainder, EOF before the end is an error.
// LaneStats::io_ns sums each read's latency (submit to completion for Uring,
// so with depth D up to D reads' latencies overlap).
//
// Two classes of jobs: demand reads (a layer waits for them) and speculative
// ones (a prefetch's guesses). A lane takes a speculative job only when no
// demand job is queued, and at most max(1, lanes / 2) (Uring: depth / 2)
// speculative reads run at once, so a guess never queues ahead of a read a
// layer needs and always leaves it a lane. settle() turns a speculative
// owner's queued jobs into demand jobs or drops them, once its layer knows
// what it needs.
//
// Thread-safety: submit() may be called from any thread. read_done() runs on a
// lane thread. Lanes are joined by the destructor after draining the queue.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "io/uring_queue.h"
#include "moe/aligned_reads.h"

namespace sluice::moe {

class ReadOwner {
 public:
  // Called once per submitted job, on a lane thread, after the read (or its failure).
  virtual void read_done(int item, uint64_t bytes, std::exception_ptr error) = 0;
  // When true, not-yet-started jobs are skipped (reported done without reading).
  virtual bool cancelled() const { return false; }

 protected:
  ~ReadOwner() = default;
};

struct LaneStats {
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> io_ns{0};
};

class ReadLanes {
 public:
  // Starts n_lanes threads. Throws Error naming --io-threads when the OS
  // refuses one (the lanes already started are stopped and joined first).
  ReadLanes(int n_lanes, LaneStats& stats);
  // Uring: throws Error naming --io-depth when the kernel refuses the ring.
  ReadLanes(io::IoEngine engine, int n_lanes, int depth, LaneStats& stats);
  ~ReadLanes();
  ReadLanes(const ReadLanes&) = delete;
  ReadLanes& operator=(const ReadLanes&) = delete;

  struct Job {
    PlannedRead read;
    ReadOwner* owner = nullptr;
    int item = 0;
  };
  enum class Priority { Demand, Speculative };
  void submit(const std::vector<Job>& jobs, Priority p = Priority::Demand);
  // The queued (not started) speculative jobs of `owner`: those whose item
  // `keep` says are needed move to the demand queue, in their order; the
  // others are reported to the owner as cancelled (read_done with 0 bytes, no
  // error) on this thread. Jobs already running are left alone.
  void settle(const ReadOwner* owner, const std::function<bool(int item)>& keep);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void run();
  void run_uring(io::UringQueue& q);
  // Under mu_: whether a lane may take a job now, and takes it (false: none).
  bool ready_locked() const;
  bool take_locked(Job& job, bool& speculative);
  void speculative_done();  // a speculative read finished: frees its share
  void read_now(const Job& job);  // one blocking read_exact, reported
  void stop();  // stops and joins every started lane

  LaneStats& stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;              // demand
  std::deque<Job> speculative_queue_;  // taken only when queue_ is empty
  int speculative_running_ = 0;
  int speculative_cap_ = 1;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<io::UringQueue> uring_;  // Uring engine only
};

}  // namespace sluice::moe
