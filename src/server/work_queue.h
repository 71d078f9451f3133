// First come, first served turns on the one Session: a request holds a Turn
// while it generates; others block in wait() in arrival order. waiting() is
// the queue depth /metrics reports.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sluice::server {

class WorkQueue {
 public:
  class Turn {
   public:
    explicit Turn(WorkQueue* q) : q_(q) {}
    Turn(Turn&& o) noexcept : q_(o.q_) { o.q_ = nullptr; }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Turn& operator=(Turn&&) = delete;
    ~Turn() {
      if (q_) q_->release();
    }

   private:
    WorkQueue* q_;
  };

  // Blocks until every earlier caller's Turn has ended.
  Turn wait() {
    std::unique_lock lk(mu_);
    const uint64_t ticket = next_ticket_++;
    cv_.wait(lk, [&] { return serving_ == ticket; });
    return Turn(this);
  }
  // Callers blocked in wait() now (not counting the one holding the turn).
  uint64_t waiting() const {
    std::lock_guard lk(mu_);
    return next_ticket_ - serving_ - (next_ticket_ > serving_ ? 1 : 0);
  }

 private:
  void release() {
    {
      std::lock_guard lk(mu_);
      ++serving_;
    }
    cv_.notify_all();
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;  // handed to the next wait()
  uint64_t serving_ = 0;      // the ticket whose turn it is
};

}  // namespace sluice::server
