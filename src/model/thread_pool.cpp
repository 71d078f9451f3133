#include "model/thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sluice::model {
namespace {

// Chunks per thread: enough that a thread which was descheduled (shared
// machine) or started late leaves work for the others, few enough that the
// claims (one compare-exchange each) stay cheap. Speed only.
constexpr int64_t kChunksPerThread = 4;
constexpr int64_t kMaxChunks = 0xFFFF;  // fits the 16-bit fields of the claim word

constexpr uint64_t pack(uint64_t gen, uint64_t n_chunks, uint64_t next) {
  return (gen << 32) | (n_chunks << 16) | next;
}
constexpr uint64_t gen_of(uint64_t w) { return w >> 32; }
constexpr int64_t chunks_of(uint64_t w) { return static_cast<int64_t>((w >> 16) & 0xFFFF); }
constexpr int64_t next_of(uint64_t w) { return static_cast<int64_t>(w & 0xFFFF); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

template <class Pred>
bool ThreadPool::spin_until(Pred pred) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  constexpr auto kBudget = std::chrono::microseconds(kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      cpu_relax();
    }
    const auto waited = Clock::now() - t0;
    if (waited >= kBudget) return pred();
    // Past the first quarter, give the core away between checks: on an
    // oversubscribed machine the thread we wait for may need it.
    if (waited >= kBudget / 4) std::this_thread::yield();
  }
}

int ThreadPool::max_threads() {
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  constexpr long kPerCpu = 4;
  constexpr long kCeiling = 1 << 16;  // keeps 4 x CPUs an int on any machine
  return static_cast<int>(std::clamp(online * kPerCpu, kPerCpu, kCeiling));
}

void ThreadPool::check_thread_count(int n) {
  const int limit = max_threads();
  if (n < 1 || n > limit)
    throw Error("-t: thread count must be 1.." + std::to_string(limit) + " (at most 4 x the " +
                std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + " online CPUs; got " + std::to_string(n) + ")");
}

ThreadPool::ThreadPool(int n_threads, const StartThread& start) : n_threads_(n_threads) {
  check_thread_count(n_threads);
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) {
    try {
      std::function<void()> body = [this] { worker_loop(); };
      workers_.push_back(start ? start(std::move(body)) : std::thread(std::move(body)));
    } catch (const std::exception& e) {
      // The destructor will not run: stop what started, or joinable threads
      // in workers_ would terminate the process when it is destroyed.
      stop_workers();
      throw Error("-t: cannot start compute thread " + std::to_string(i + 1) + " of " +
                  std::to_string(n_threads_) + ": " + e.what());
    }
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

uint64_t ThreadPool::run_chunks() {
  uint64_t w = claim_.load(std::memory_order_acquire);
  for (;;) {
    const int64_t c = chunks_of(w);
    const int64_t k = next_of(w);
    if (k >= c) return gen_of(w);
    if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    // Chunk k of job gen_of(w) is ours: the job cannot complete before we
    // report it done, so fn_ and n_ are that job's.
    // Boundaries rounded down to multiples of grain_: chunks hold at least
    // grain_ indices each (n_chunks <= n / grain_), so none becomes empty.
    const int64_t begin = n_ * k / c / grain_ * grain_;
    const int64_t end = k + 1 == c ? n_ : n_ * (k + 1) / c / grain_ * grain_;
    if (begin < end) {
      try {
        (*fn_)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    if (done_chunks_.fetch_add(1) + 1 == c && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller is in (or entering) its wait
      done_cv_.notify_one();
    }
    ++w;  // expected next word; the compare-exchange corrects it if others claimed
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    const auto has_news = [&] { return stop_.load(std::memory_order_relaxed) || gen_of(claim_.load()) != seen; };
    if (!spin_until(has_news)) {
      std::unique_lock<std::mutex> lock(mu_);
      sleeping_workers_.fetch_add(1);
      start_cv_.wait(lock, has_news);
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = run_chunks();
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t min_chunk) {
  if (n <= 0) return;
  const int64_t n_chunks = std::min({n / std::max<int64_t>(min_chunk, 1), kChunksPerThread * n_threads_, kMaxChunks});
  if (n_threads_ == 1 || n_chunks <= 1) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  grain_ = std::max<int64_t>(min_chunk, 1);
  error_ = nullptr;
  done_chunks_.store(0, std::memory_order_relaxed);
  const uint64_t gen = gen_of(claim_.load(std::memory_order_relaxed)) + 1;
  // Publishes the job. Here and for caller_sleeping_ below, the store that
  // precedes the other side's check is an exchange, not a plain seq_cst store:
  // the same on x86 (a seq_cst store is an xchg there) and on ARMv8 (SWPAL vs
  // STLR), but qemu's TCG translates STLR;LDAR on an x86 host without a fence
  // between the store and the load, so the two sides of the handshake could
  // each miss the other: a worker asleep beside a caller asleep, forever (seen
  // once under qemu -cpu max in CI). A read-modify-write is a locked
  // instruction on the host, which drains the store first.
  claim_.exchange(pack(gen & 0xFFFFFFFFu, static_cast<uint64_t>(n_chunks), 0));
  if (sleeping_workers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }  // a worker between its check and its wait gets the notify
    start_cv_.notify_all();
  }
  run_chunks();
  const auto all_done = [&] { return done_chunks_.load() == n_chunks; };
  if (!spin_until(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_sleeping_.exchange(true);  // an exchange: see claim_ above
    done_cv_.wait(lock, all_done);
    caller_sleeping_.store(false);
  }
  fn_ = nullptr;
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace sluice::model
