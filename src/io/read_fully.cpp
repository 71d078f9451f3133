#include "io/read_fully.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace sluice::io {
void read_failed(const std::string& path, size_t n, uint64_t offset, const std::string& cause) {
  fail(path, "read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) + " failed: " + cause);
}

RawPread fd_pread(int fd) {
  return [fd](void* d, size_t k, uint64_t off) -> ssize_t {
    const ssize_t r = ::pread(fd, d, k, static_cast<off_t>(off));
    return r < 0 ? -errno : r;
  };
}

ssize_t read_once(const RawPread& raw, void* dst, size_t n, uint64_t offset) {
  for (int interrupted = 0;; ++interrupted) {
    const ssize_t r = raw(dst, n, offset);
    if ((r == -EINTR || r == -EAGAIN) && interrupted < kMaxInterrupts) continue;
    return r;
  }
}

void read_fully(const RawPread& raw, const std::string& path, void* dst, size_t n,
                uint64_t offset) {
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < n;) {
    const ssize_t r = read_once(raw, out + done, n - done, offset + done);
    if (r < 0) read_failed(path, n, offset, std::strerror(static_cast<int>(-r)));
    if (r == 0) read_failed(path, n, offset, "unexpected end of file after " + std::to_string(done) + " bytes");
    done += static_cast<size_t>(r);
  }
}

}  // namespace sluice::io
