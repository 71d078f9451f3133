#include "io/direct_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/aligned_buffer.h"
#include "util/error.h"

namespace sluice::io {

FdFile::~FdFile() {
  if (fd_ >= 0) ::close(fd_);
}

void FdFile::read_exact(void* dst, size_t n, uint64_t offset) const {
  if (n == 0) return;
  if (offset > size_ || n > size_ - offset) {
    read_failed(path_, n, offset, "range ends past end of file (size " + std::to_string(size_) + ")");
  }
  read_fully(fd_pread(fd_), path_, dst, n, offset);
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
    const ssize_t r = read_once(fd_pread(fd), probe.data(), kIoAlign, 0);
    if (r < 0) {
      const int err = static_cast<int>(-r);
      ::close(fd);
      if (err == EINVAL) return nullptr;
      fail(path, std::string("cannot read: ") + std::strerror(err));
    }
  }
  return std::unique_ptr<FdFile>(
      new FdFile(path, fd, static_cast<uint64_t>(st.st_size), direct));
}

}  // namespace sluice::io
