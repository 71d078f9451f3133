#include "cli/stdout_output.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "util/error.h"

namespace sluice::cli {
namespace {

[[noreturn]] void stdout_failed(int err) {
  if (err == EPIPE) throw StdoutClosed();
  // A sticky stream error whose errno is gone (should not happen: every write
  // is checked where it is made).
  if (err == 0) throw Error("stdout: write failed");
  throw Error(std::string("stdout: write failed: ") + std::strerror(err));
}

}  // namespace

void out(std::string_view s) {
  errno = 0;
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) stdout_failed(errno);
}

void outf(const char* fmt, ...) {
  errno = 0;
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vfprintf(stdout, fmt, ap);
  va_end(ap);
  if (n < 0) stdout_failed(errno);
}

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0) stdout_failed(errno);
  if (std::ferror(stdout)) stdout_failed(0);
}

void close_stdout() {
  flush_stdout();
  errno = 0;
  // Closing reports what a flush cannot (e.g. a deferred NFS write error).
  if (std::fclose(stdout) != 0 && errno != EBADF) stdout_failed(errno);
}

}  // namespace sluice::cli
