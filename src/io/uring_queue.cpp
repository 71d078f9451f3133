#include "io/uring_queue.h"

#include <liburing.h>

#include <cstring>

#include "util/error.h"

namespace sluice::io {

struct UringQueue::Ring {
  io_uring ring{};
};

UringQueue::UringQueue(unsigned depth, const std::string& flag) : ring_(std::make_unique<Ring>()), depth_(depth) {
  if (depth < 1 || depth > 4096) throw Error(flag + ": the queue depth must be in [1, 4096]");
  const int rc = io_uring_queue_init(depth, &ring_->ring, 0);
  if (rc < 0) throw Error(flag + ": the kernel refused an io_uring of " + std::to_string(depth) + " entries: " +
                          std::strerror(-rc));
}

UringQueue::~UringQueue() {
  // Reads still in flight write into their callers' buffers: wait them out
  // before the ring (and possibly those buffers) goes away.
  while (in_flight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_->ring, &cqe) < 0) break;
    io_uring_cqe_seen(&ring_->ring, cqe);
    --in_flight_;
  }
  io_uring_queue_exit(&ring_->ring);
}

void UringQueue::prepare(int fd, void* dst, uint32_t n, uint64_t offset, uint64_t tag) {
  if (in_flight_ >= depth_) throw Error("io_uring: more reads prepared than the queue depth");
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  if (!sqe) throw Error("io_uring: no free submission entry");
  io_uring_prep_read(sqe, fd, dst, n, offset);
  io_uring_sqe_set_data64(sqe, tag);
  ++in_flight_;
  ++prepared_;
}

UringQueue::Completion UringQueue::wait() {
  if (in_flight_ == 0) throw Error("io_uring: wait with nothing in flight");
  if (prepared_ > 0) {
    const int rc = io_uring_submit(&ring_->ring);
    if (rc < 0) throw Error(std::string("io_uring_submit: ") + std::strerror(-rc));
    prepared_ = 0;
  }
  io_uring_cqe* cqe = nullptr;
  int rc;
  do {
    rc = io_uring_wait_cqe(&ring_->ring, &cqe);
  } while (rc == -EINTR);
  if (rc < 0) throw Error(std::string("io_uring_wait_cqe: ") + std::strerror(-rc));
  Completion c{io_uring_cqe_get_data64(cqe), cqe->res};
  io_uring_cqe_seen(&ring_->ring, cqe);
  --in_flight_;
  return c;
}

const char* io_engine_name(IoEngine e) { return e == IoEngine::Uring ? "uring" : "pread"; }

IoEngine parse_io_engine(const std::string& s, const std::string& flag) {
  if (s == "pread") return IoEngine::Pread;
  if (s == "uring") return IoEngine::Uring;
  throw Error(flag + ": unknown I/O engine '" + s + "' (expected pread or uring)");
}

bool uring_available() {
  io_uring ring{};
  if (io_uring_queue_init(1, &ring, 0) < 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

}  // namespace sluice::io
