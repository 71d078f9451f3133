#include "moe/read_lanes.h"

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
    read_now(job);
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
  };
  std::vector<InFlight> slots(q.depth());
  std::vector<size_t> free_slots;
  for (size_t i = slots.size(); i-- > 0;) free_slots.push_back(i);
  std::vector<Job> sync_jobs, skipped;
  auto issue = [&q](size_t slot, InFlight& f, int fd) {
    q.prepare(fd, f.job.read.dst + f.done, static_cast<uint32_t>(f.job.read.n - f.done), f.job.read.offset + f.done,
              slot);
  };
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (q.in_flight() == 0) {
        cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, drained, nothing in flight
      }
      while (!queue_.empty() && !free_slots.empty()) {
        Job job = queue_.front();
        queue_.pop_front();
        const auto* fd_file = dynamic_cast<const io::FdFile*>(job.read.file);
        if (job.owner->cancelled()) {
          skipped.push_back(job);
        } else if (!fd_file) {
          sync_jobs.push_back(job);
        } else {
          const size_t slot = free_slots.back();
          free_slots.pop_back();
          slots[slot] = InFlight{job, 0, std::chrono::steady_clock::now()};
          issue(slot, slots[slot], fd_file->fd());
        }
      }
    }
    for (const Job& j : skipped) j.owner->read_done(j.item, 0, nullptr);
    skipped.clear();
    for (const Job& j : sync_jobs) read_now(j);
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
    free_slots.push_back(c.tag);
    job.owner->read_done(job.item, bytes, error);
  }
}

}  // namespace sluice::moe
