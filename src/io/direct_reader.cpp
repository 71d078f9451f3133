#include "io/direct_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/aligned_buffer.h"
#include "util/error.h"

namespace sluice::io {

namespace {

[[noreturn]] void read_failed(const std::string& path, size_t n, uint64_t offset,
                              const std::string& cause) {
  fail(path, "read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                 " failed: " + cause);
}

}  // namespace

void read_fully(const RawPread& raw, const std::string& path, void* dst, size_t n,
                uint64_t offset) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  // Bound the number of consecutive interrupted attempts so a broken source
  // cannot spin forever.
  int interrupted = 0;
  while (done < n) {
    const ssize_t r = raw(out + done, n - done, offset + done);
    if (r < 0) {
      const int err = static_cast<int>(-r);
      if ((err == EINTR || err == EAGAIN) && ++interrupted < 1000) continue;
      read_failed(path, n, offset, std::strerror(err));
    }
    interrupted = 0;
    if (r == 0) {
      read_failed(path, n, offset,
                  "unexpected end of file after " + std::to_string(done) + " bytes");
    }
    done += static_cast<size_t>(r);
  }
}

FdFile::~FdFile() {
  if (fd_ >= 0) ::close(fd_);
}

void FdFile::read_exact(void* dst, size_t n, uint64_t offset) const {
  if (n == 0) return;
  if (offset > size_ || n > size_ - offset) {
    read_failed(path_, n, offset, "range ends past end of file (size " + std::to_string(size_) + ")");
  }
  const int fd = fd_;
  read_fully(
      [fd](void* d, size_t k, uint64_t off) -> ssize_t {
        const ssize_t r = ::pread(fd, d, k, static_cast<off_t>(off));
        return r < 0 ? -errno : r;
      },
      path_, dst, n, offset);
}

std::unique_ptr<FdFile> open_fd_file(const std::string& path, bool direct) {
  int flags = O_RDONLY | O_CLOEXEC;
  if (direct) flags |= O_DIRECT;
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    if (direct && err == EINVAL) return nullptr;
    fail(path, std::string("cannot open: ") + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  if (direct) {
    // Some filesystems accept O_DIRECT at open but reject the reads.
    AlignedBuffer probe(kIoAlign);
    const ssize_t r = ::pread(fd, probe.data(), kIoAlign, 0);
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      if (err == EINVAL) return nullptr;
      fail(path, std::string("cannot read: ") + std::strerror(err));
    }
  }
  return std::unique_ptr<FdFile>(
      new FdFile(path, fd, static_cast<uint64_t>(st.st_size), direct));
}

}  // namespace sluice::io
