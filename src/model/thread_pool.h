// A small persistent pool of worker threads for data-parallel loops.
//
// parallel_for(n, fn) splits [0, n) into one contiguous chunk per thread
// (the calling thread takes chunk 0) and returns when every chunk is done.
// Which thread computes an index never changes what is computed for it, so
// results are independent of the thread count as long as `fn` writes each
// output element from exactly one index (the engine splits output ROWS).
//
// Thread-safety: one parallel_for at a time per pool (the engine's compute
// thread is the only caller). Exceptions thrown by `fn` on any thread are
// captured and rethrown on the caller after all chunks finished.
#pragma once

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
  // n_threads >= 1 counts the calling thread; n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(begin, end) is called for disjoint ranges covering [0, n).
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;
  void parallel_for(int64_t n, const RangeFn& fn);

 private:
  void worker_loop(int index);
  void run_chunk(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped per parallel_for; workers wait for a change
  int pending_ = 0;          // workers still running the current generation
  bool stop_ = false;
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  std::exception_ptr error_;
};

}  // namespace sluice::model
