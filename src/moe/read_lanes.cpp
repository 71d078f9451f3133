#include "moe/read_lanes.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>

#include "io/direct_reader.h"
#include "util/error.h"

namespace sluice::moe {

ReadLanes::ReadLanes(int n_lanes, LaneStats& stats) : ReadLanes(io::IoEngine::Pread, n_lanes, 0, stats) {}

ReadLanes::ReadLanes(io::IoEngine engine, int n_lanes, int depth, LaneStats& stats) : stats_(stats) {
  if (engine == io::IoEngine::Pread) {
    if (n_lanes < 1) n_lanes = 1;
    speculative_cap_ = std::max(1, n_lanes / 2);
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
    return;
  }
  speculative_cap_ = std::max(1, depth / 2);
  uring_ = std::make_unique<io::UringQueue>(static_cast<unsigned>(depth),
                                           "--io-engine uring --io-depth " + std::to_string(depth));
  try {
    threads_.emplace_back([this] { run_uring(*uring_); });
  } catch (const std::exception& e) {
    throw Error(std::string("--io-engine uring: cannot start the reader thread: ") + e.what());
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

void ReadLanes::submit(const std::vector<Job>& jobs, Priority p) {
  if (jobs.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    std::deque<Job>& q = p == Priority::Demand ? queue_ : speculative_queue_;
    q.insert(q.end(), jobs.begin(), jobs.end());
  }
  if (jobs.size() == 1) {
    cv_.notify_one();
  } else {
    cv_.notify_all();
  }
}

void ReadLanes::settle(const ReadOwner* owner, const std::function<bool(int item)>& keep) {
  std::vector<Job> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = speculative_queue_.begin(); it != speculative_queue_.end();) {
      if (it->owner != owner) {
        ++it;
        continue;
      }
      if (keep(it->item)) {
        queue_.push_back(*it);
      } else {
        dropped.push_back(*it);
      }
      it = speculative_queue_.erase(it);
    }
  }
  cv_.notify_all();
  for (const Job& j : dropped) j.owner->read_done(j.item, 0, nullptr);
}

// Stopping lifts the cap: every queued job is drained, so no owner waits
// forever on a dropped one.
bool ReadLanes::ready_locked() const {
  return !queue_.empty() ||
         (!speculative_queue_.empty() && (speculative_running_ < speculative_cap_ || stopping_));
}

bool ReadLanes::take_locked(Job& job, bool& speculative) {
  if (!ready_locked()) return false;
  speculative = queue_.empty();  // ready with no demand job: a speculative one may run
  std::deque<Job>& q = speculative ? speculative_queue_ : queue_;
  job = q.front();
  q.pop_front();
  if (speculative) ++speculative_running_;
  return true;
}

void ReadLanes::speculative_done() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    --speculative_running_;
  }
  cv_.notify_one();
}

void ReadLanes::run() {
  for (;;) {
    Job job;
    bool speculative = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return stopping_ || ready_locked(); });
      if (!take_locked(job, speculative)) return;  // stopping, drained
    }
    read_now(job);
    if (speculative) speculative_done();
  }
}

void ReadLanes::read_now(const Job& job) {
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
    stats_.io_ns += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count());
    stats_.reads += 1;
    stats_.bytes_read += bytes;
  }
  job.owner->read_done(job.item, bytes, error);
}

void ReadLanes::run_uring(io::UringQueue& q) {
  struct InFlight {
    Job job;
    size_t done = 0;  // bytes already read (a short read re-issues the rest)
    std::chrono::steady_clock::time_point t0;
    bool speculative = false;
  };
  std::vector<InFlight> slots(q.depth());
  std::vector<size_t> free_slots;
  for (size_t i = slots.size(); i-- > 0;) free_slots.push_back(i);
  std::vector<std::pair<Job, bool>> sync_jobs, skipped;  // (job, speculative)
  auto issue = [&q](size_t slot, InFlight& f, int fd) {
    q.prepare(fd, f.job.read.dst + f.done, static_cast<uint32_t>(f.job.read.n - f.done), f.job.read.offset + f.done,
              slot);
  };
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (q.in_flight() == 0) {
        cv_.wait(lk, [this] { return stopping_ || ready_locked(); });
        if (!ready_locked()) return;  // stopping, drained, nothing in flight
      }
      Job job;
      bool speculative = false;
      while (!free_slots.empty() && take_locked(job, speculative)) {
        const auto* fd_file = dynamic_cast<const io::FdFile*>(job.read.file);
        if (job.owner->cancelled()) {
          skipped.emplace_back(job, speculative);
        } else if (!fd_file) {
          sync_jobs.emplace_back(job, speculative);
        } else {
          const size_t slot = free_slots.back();
          free_slots.pop_back();
          slots[slot] = InFlight{job, 0, std::chrono::steady_clock::now(), speculative};
          issue(slot, slots[slot], fd_file->fd());
        }
      }
    }
    for (const auto& [j, spec] : skipped) {
      j.owner->read_done(j.item, 0, nullptr);
      if (spec) speculative_done();
    }
    skipped.clear();
    for (const auto& [j, spec] : sync_jobs) {
      read_now(j);
      if (spec) speculative_done();
    }
    sync_jobs.clear();
    if (q.in_flight() == 0) continue;
    const io::UringQueue::Completion c = q.wait();
    InFlight& f = slots[c.tag];
    const auto* fd_file = static_cast<const io::FdFile*>(f.job.read.file);
    std::exception_ptr error;
    if (c.res < 0 || (c.res == 0 && f.done < f.job.read.n)) {
      const std::string why = c.res < 0 ? std::strerror(-c.res) : std::string("unexpected end of file");
      error = std::make_exception_ptr(Error(fd_file->path() + ": read of " + std::to_string(f.job.read.n) +
                                            " bytes at offset " + std::to_string(f.job.read.offset) +
                                            " failed: " + why));
    } else {
      f.done += static_cast<size_t>(c.res);
      if (f.done < f.job.read.n) {  // short read: the rest, same slot
        issue(c.tag, f, fd_file->fd());
        continue;
      }
    }
    const auto dt = std::chrono::steady_clock::now() - f.t0;
    stats_.io_ns += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(dt).count());
    stats_.reads += 1;
    const uint64_t bytes = error ? 0 : f.job.read.n;
    stats_.bytes_read += bytes;
    const Job job = f.job;
    const bool speculative = f.speculative;
    free_slots.push_back(c.tag);
    job.owner->read_done(job.item, bytes, error);
    if (speculative) speculative_done();
  }
}

}  // namespace sluice::moe
