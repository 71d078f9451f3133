// io::open_file — a File over a POSIX file descriptor, read with pread.
//
// Reads go through io::read_fully (bounded EINTR retry, short reads
// continued). pread has no shared file position, so one PosixFile may be read from many
// threads at once. The descriptor is owned and closed by the object.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/file.h"
#include "io/read_fully.h"
#include "util/error.h"

namespace sluice::io {
namespace {

constexpr uint64_t kDirectAlign = 4096;

std::string errno_text(int err) { return std::strerror(err); }

class PosixFile final : public File {
 public:
  PosixFile(std::string path, int fd, uint64_t size, bool direct)
      : path_(std::move(path)), fd_(fd), size_(size), direct_(direct) {}
  ~PosixFile() override { ::close(fd_); }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }

  void read_exact(void* dst, size_t n, uint64_t offset) const override {
    if (direct_ && (reinterpret_cast<uintptr_t>(dst) % kDirectAlign != 0 ||
                    n % kDirectAlign != 0 || offset % kDirectAlign != 0)) {
      fail(path_, "O_DIRECT read of " + std::to_string(n) + " bytes at offset " +
                      std::to_string(offset) + " is not 4096-byte aligned (buffer, size and offset must be)");
    }
    read_fully(fd_pread(fd_), path_, dst, n, offset);
  }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
  bool direct_;
};

}  // namespace

std::unique_ptr<File> open_file(const std::string& path, const OpenOptions& opts) {
  int flags = O_RDONLY | O_CLOEXEC;
  if (opts.direct) flags |= O_DIRECT;
  int fd;
  do {
    fd = ::open(path.c_str(), flags);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    if (opts.direct && err == EINVAL)
      fail(path, "cannot open with O_DIRECT: the filesystem does not support direct I/O");
    fail(path, "cannot open: " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, "cannot stat: " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "cannot open: not a regular file");
  }
  return std::make_unique<PosixFile>(path, fd, static_cast<uint64_t>(st.st_size), opts.direct);
}

}  // namespace sluice::io
