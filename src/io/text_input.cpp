#include "io/text_input.h"

#include "io/read_fully.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace sluice::io {
namespace {

std::string mib(uint64_t bytes) {
  return bytes % (uint64_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + "-byte";
}

}  // namespace

std::string read_text_input(const std::string& path, const std::string& flag, uint64_t limit) {
  const std::string where = flag + " " + (path == "-" ? std::string("- (stdin)") : path);
  const bool from_stdin = path == "-";
  const int fd = from_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail(where, std::string("cannot open: ") + std::strerror(errno));
  struct Closer {
    int fd;
    bool own;
    ~Closer() {
      if (own) ::close(fd);
    }
  } closer{fd, !from_stdin};

  if (!from_stdin) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(where, std::string("cannot stat: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail(where, "is a directory, not a text file");
    if (!S_ISREG(st.st_mode)) fail(where, "is not a regular file (give a file, or - for stdin)");
    if (static_cast<uint64_t>(st.st_size) > limit)
      fail(where, "is " + std::to_string(st.st_size) + " bytes, above the " + mib(limit) + " limit for text inputs");
  }
  std::string text;
  char buf[65536];
  // Sequential reads (stdin may be a pipe) through the one bounded EINTR retry.
  const RawPread next = [fd](void* dst, size_t n, uint64_t) -> ssize_t {
    const ssize_t k = ::read(fd, dst, n);
    return k < 0 ? -errno : k;
  };
  for (;;) {
    const ssize_t n = read_once(next, buf, sizeof buf, 0);
    if (n < 0) fail(where, std::string("read failed: ") + std::strerror(static_cast<int>(-n)));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limit)
      fail(where, "is larger than the " + mib(limit) + " limit for text inputs");
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace sluice::io
