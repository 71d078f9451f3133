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
// Thread-safety: submit() may be called from any thread. read_done() runs on a
// lane thread. Lanes are joined by the destructor after draining the queue.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <exception>
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
  void submit(const std::vector<Job>& jobs);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void run();
  void run_uring(io::UringQueue& q);
  void read_now(const Job& job);  // one blocking read_exact, reported
  void stop();  // stops and joins every started lane

  LaneStats& stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::unique_ptr<io::UringQueue> uring_;  // Uring engine only
};

}  // namespace sluice::moe
