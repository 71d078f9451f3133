// FaultFile — an io::File wrapper that injects read faults, for tests.
//
// It reads through io::read_fully (the retry loop every File uses), feeding
// it a raw read that misbehaves as configured, so tests exercise both the
// retry path (EINTR, short reads) and the failure path (EIO, early EOF) of
// every layer above File.
//
// Thread-safety: like any File, read_exact may be called from many threads;
// the fault counters are atomic, so "the Nth read" is the Nth call overall.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "io/file.h"

namespace sluice::io {

struct FaultPlan {
  // read_exact calls are numbered 1, 2, ... across all threads.
  uint64_t fail_read = 0;          // this call fails with EIO (0: never)
  bool fail_every_after = false;   // ... and so does every later call
  uint64_t max_bytes_per_raw = 0;  // raw reads return at most this much (short reads; 0: no cap)
  uint64_t eintr_every = 0;        // every k-th raw attempt fails with EINTR first (0: never)
  uint64_t eof_at = UINT64_MAX;    // raw reads see end-of-file at this offset
};

class FaultFile final : public File {
 public:
  FaultFile(std::shared_ptr<const File> inner, FaultPlan plan)
      : inner_(std::move(inner)), plan_(plan) {}

  const std::string& path() const override { return inner_->path(); }
  uint64_t size() const override { return inner_->size(); }
  void read_exact(void* dst, size_t n, uint64_t offset) const override;

  uint64_t calls() const { return calls_.load(); }
  uint64_t raw_attempts() const { return raw_.load(); }
  uint64_t injected_eintr() const { return eintr_.load(); }

 private:
  std::shared_ptr<const File> inner_;
  FaultPlan plan_;
  mutable std::atomic<uint64_t> calls_{0};
  mutable std::atomic<uint64_t> raw_{0};
  mutable std::atomic<uint64_t> eintr_{0};
};

}  // namespace sluice::io
