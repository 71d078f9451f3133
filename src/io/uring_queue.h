// UringQueue — positional reads through one io_uring (liburing), with up to
// `depth` reads in flight from a single thread: the alternative to one
// blocking pread per lane thread (--io-engine uring --io-depth N).
//
// Contract: prepare() only when in_flight() < depth(); a completion's `res`
// is the kernel's (bytes read, or -errno); a short read is the caller's to
// re-issue. O_DIRECT rules are the descriptor's (aligned dst/n/offset).
//
// Thread-safety: none; one thread owns a queue.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace sluice::io {

// How expert reads are issued: Pread, one blocking pread per lane thread
// (--io-threads lanes); Uring, one thread keeping --io-depth reads in flight
// through an io_uring. Both read the same bytes into the same buffers.
enum class IoEngine { Pread, Uring };
const char* io_engine_name(IoEngine e);  // "pread" | "uring"
// "pread" | "uring"; Error naming `flag` otherwise.
IoEngine parse_io_engine(const std::string& s, const std::string& flag);

class UringQueue {
 public:
  // Throws Error naming `flag` (e.g. "--io-depth 64") when the kernel refuses
  // the ring (io_uring disabled, RLIMIT_MEMLOCK, ...).
  UringQueue(unsigned depth, const std::string& flag);
  ~UringQueue();
  UringQueue(const UringQueue&) = delete;
  UringQueue& operator=(const UringQueue&) = delete;

  unsigned depth() const { return depth_; }
  unsigned in_flight() const { return in_flight_; }

  // Queues a read of n bytes at `offset` of `fd` into dst (submitted by the
  // next wait()). Throws Error when the queue is full (a caller bug).
  void prepare(int fd, void* dst, uint32_t n, uint64_t offset, uint64_t tag);

  struct Completion {
    uint64_t tag = 0;
    int res = 0;  // bytes read, or -errno
  };
  // Submits what was prepared and waits for one completion. Throws Error
  // when nothing is in flight or io_uring_wait_cqe fails.
  Completion wait();

 private:
  struct Ring;
  std::unique_ptr<Ring> ring_;
  unsigned depth_ = 0;
  unsigned in_flight_ = 0;
  unsigned prepared_ = 0;
};

// Whether this kernel gives this process an io_uring (a probe ring of 1 entry).
bool uring_available();

}  // namespace sluice::io
