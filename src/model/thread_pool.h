// A small persistent pool of worker threads for data-parallel loops.
//
// parallel_for(n, fn) splits [0, n) into contiguous chunks, runs them on the
// calling thread and the workers, and returns when every chunk is done. Which
// thread computes an index never changes what is computed for it, so results
// are independent of the thread count as long as `fn` writes each output
// element from exactly one index (the engine splits output ROWS) and what it
// computes for an index does not depend on the range it was called with.
//
// Chunks are claimed dynamically (an atomic counter): a thread that finishes
// early, or a caller whose worker was descheduled on a busy machine, takes the
// remaining chunks instead of waiting. Chunk boundaries depend only on n and
// the pool size, never on timing.
//
// Waiting: the engine calls parallel_for many times per token with a few
// microseconds of serial work in between, so a futex wake-up per call (tens of
// microseconds on a loaded machine) would dominate. Workers and the caller
// therefore spin (with a pause instruction) for a bounded time, kSpinMicros,
// before blocking on a condition variable; an idle pool costs no CPU after
// that.
//
// Limits: a pool holds at most max_threads() threads (4 x the online CPUs):
// more only adds contention, and an absurd count (-t 100000) would otherwise
// exhaust the process's thread limit. The constructor throws sluice::Error
// above the limit, and also when the OS refuses to start a worker; in that
// case the workers already started are stopped and joined before the throw,
// so a failed construction never leaks, hangs or terminates.
//
// Thread-safety: one parallel_for at a time per pool (the engine's compute
// thread is the only caller). Exceptions thrown by `fn` on any thread are
// captured and rethrown on the caller after all chunks finished (the first
// one wins; remaining chunks still run).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice::model {

class ThreadPool {
 public:
  // Starts one worker running `body`. Tests substitute one that throws
  // (std::system_error, like std::thread when the OS refuses) to exercise the
  // failure path.
  using StartThread = std::function<std::thread(std::function<void()> body)>;

  // n_threads in [1, max_threads()] counts the calling thread; n_threads - 1
  // workers are started (with `start`, or std::thread when empty). Throws
  // Error for n_threads outside that range or when a worker cannot start.
  explicit ThreadPool(int n_threads, const StartThread& start = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // The largest pool: 4 x the online CPUs (sysconf), at least 4.
  static int max_threads();
  // Throws Error naming -t (the flag that sets the compute threads) unless
  // 1 <= n <= max_threads(). The CLI validates -t with this before loading.
  static void check_thread_count(int n);

  // fn(begin, end) is called for disjoint ranges covering [0, n). Ranges hold
  // at least min_chunk indices where n allows, and start at multiples of
  // min_chunk (for callers whose per-call efficiency grows with the range and
  // that work in groups of min_chunk, e.g. the multi-column dot or the tile
  // GEMM over positions: only the last range has a partial group).
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;
  void parallel_for(int64_t n, const RangeFn& fn, int64_t min_chunk = 1);

  // How long a waiting thread spins before it blocks. Speed only.
  static constexpr int kSpinMicros = 100;

 private:
  void worker_loop();
  void stop_workers();  // stops and joins every started worker
  // Claims and runs chunks of whatever job claim_ holds until none is left;
  // returns the generation it last saw.
  uint64_t run_chunks();
  // Spins up to kSpinMicros for pred() to become true; returns its last value.
  template <class Pred>
  static bool spin_until(Pred pred);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The current job. fn_ and n_ are written by the caller before it publishes
  // the job in claim_ (release) and read by a thread only after it claimed a
  // chunk of that job, which keeps the job from completing (and the caller
  // from overwriting them) until that chunk is done.
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;  // chunk boundaries are multiples of it (min_chunk)
  // One word, so a claim is valid only for the job it was made in:
  // generation (bits 32..63) | chunk count (bits 16..31) | next chunk (0..15).
  // A thread claims chunk k by a compare-exchange from (g, c, k) to
  // (g, c, k + 1); a late thread cannot claim a chunk of a finished job.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_chunks_{0};  // chunks of the current job finished

  std::atomic<bool> stop_{false};
  // Blocking fallback. sleeping_workers_ / caller_sleeping_ tell the other
  // side whether it must take the mutex and notify (checked after publishing,
  // with sequentially consistent ordering, so no wake-up is lost; each side
  // publishes with a read-modify-write, see parallel_for).
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};

  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace sluice::model
