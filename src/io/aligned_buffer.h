// AlignedBuffer — an owned, 4 KiB-aligned block of anonymous memory.
//
// Why: O_DIRECT needs the destination, length and file offset aligned to the
// logical block size (4 KiB covers every device we care about), and mincore /
// madvise need page-aligned ranges. The memory comes from mmap(MAP_ANONYMOUS)
// so it is page-aligned, zero-filled, and returned to the kernel on release.
//
// Ownership: move-only RAII. Thread-safety: none of its own; callers share the
// bytes under their own rules.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace sluice::io {

inline constexpr uint64_t kIoAlign = 4096;

constexpr uint64_t align_down(uint64_t v, uint64_t a = kIoAlign) { return v - v % a; }
constexpr uint64_t align_up(uint64_t v, uint64_t a = kIoAlign) { return align_down(v + a - 1, a); }

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Allocates at least n bytes (rounded up to 4 KiB). Throws Error if the
  // kernel refuses the mapping.
  explicit AlignedBuffer(size_t n) { allocate(n); }
  ~AlignedBuffer() { release(); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // usable bytes (a multiple of 4 KiB)
  bool empty() const { return size_ == 0; }

  // Ensures capacity >= n; reallocates (dropping the contents) only when too
  // small, so a buffer reused across requests allocates once per high-water mark.
  void ensure(size_t n) {
    if (n <= size_) return;
    release();
    allocate(n);
  }

 private:
  void allocate(size_t n) {
    if (n == 0) return;
    const size_t bytes = static_cast<size_t>(align_up(n));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw Error("cannot allocate " + std::to_string(bytes) + " bytes of aligned memory: " +
                  std::strerror(errno));
    }
    data_ = static_cast<uint8_t*>(p);
    size_ = bytes;
  }
  void release() noexcept {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sluice::io
