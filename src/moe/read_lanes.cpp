#include "moe/read_lanes.h"

#include <chrono>
#include <exception>
#include <string>

#include "util/error.h"

namespace sluice::moe {

ReadLanes::ReadLanes(int n_lanes, LaneStats& stats) : stats_(stats) {
  if (n_lanes < 1) n_lanes = 1;
  threads_.reserve(static_cast<size_t>(n_lanes));
  for (int i = 0; i < n_lanes; ++i) {
    try {
      threads_.emplace_back([this] { run(); });
    } catch (const std::exception& e) {
      // The destructor will not run: stop and join the lanes that started, or
      // their joinable std::threads would terminate the process.
      stop();
      throw Error("--io-threads: cannot start read lane " + std::to_string(i + 1) + " of " +
                  std::to_string(n_lanes) + ": " + e.what());
    }
  }
}

ReadLanes::~ReadLanes() { stop(); }

void ReadLanes::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReadLanes::submit(const std::vector<Job>& jobs) {
  if (jobs.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.insert(queue_.end(), jobs.begin(), jobs.end());
  }
  if (jobs.size() == 1) {
    cv_.notify_one();
  } else {
    cv_.notify_all();
  }
}

void ReadLanes::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
      // Drain before stopping so no owner waits forever on a dropped job.
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    std::exception_ptr error;
    uint64_t bytes = 0;
    if (!job.owner->cancelled()) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        job.read.file->read_exact(job.read.dst, job.read.n, job.read.offset);
        bytes = job.read.n;
      } catch (...) {
        error = std::current_exception();
      }
      const auto dt = std::chrono::steady_clock::now() - t0;
      stats_.io_ns += static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count());
      stats_.reads += 1;
      stats_.bytes_read += bytes;
    }
    job.owner->read_done(job.item, bytes, error);
  }
}

}  // namespace sluice::moe
