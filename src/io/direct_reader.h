// FdFile — an io::File over a POSIX descriptor, optionally opened O_DIRECT.
//
// Why a second File implementation: the expert store and dense loader need to
// know whether O_DIRECT is really in effect (so they align their reads) and
// need the descriptor for posix_fadvise. open_file() in io/file.h answers
// neither question.
//
// O_DIRECT detection: some filesystems (tmpfs on older kernels, some FUSE and
// network filesystems) refuse O_DIRECT either at open() or at the first read
// with EINVAL. open_fd_file(path, /*direct=*/true) probes one aligned 4 KiB
// read and returns nullptr when O_DIRECT is refused, so callers can fall back.
//
// Contract for direct files: read_exact's dst, n and offset must be 4 KiB
// aligned, except that a read may end at end-of-file (the kernel returns the
// short tail; read_exact accepts it only if it covers all n requested bytes,
// which an aligned request past EOF cannot, so callers read the unaligned tail
// of a file through a buffered FdFile).
//
// Thread-safety: read_exact is safe from many threads (pread, no shared offset).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/file.h"
#include "io/read_fully.h"  // RawPread, read_fully: the read loop FdFile uses

namespace sluice::io {

class FdFile final : public File {
 public:
  ~FdFile() override;
  FdFile(const FdFile&) = delete;
  FdFile& operator=(const FdFile&) = delete;

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  void read_exact(void* dst, size_t n, uint64_t offset) const override;

  int fd() const { return fd_; }
  bool direct() const { return direct_; }

 private:
  friend std::unique_ptr<FdFile> open_fd_file(const std::string& path, bool direct);
  FdFile(std::string path, int fd, uint64_t size, bool direct)
      : path_(std::move(path)), fd_(fd), size_(size), direct_(direct) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  bool direct_ = false;
};

// Opens a regular file read-only. direct=false: buffered; throws Error naming
// the path when it cannot be opened. direct=true: O_DIRECT; returns nullptr
// when the filesystem refuses O_DIRECT (EINVAL at open or on a probe read),
// throws Error for any other failure.
std::unique_ptr<FdFile> open_fd_file(const std::string& path, bool direct);

}  // namespace sluice::io
