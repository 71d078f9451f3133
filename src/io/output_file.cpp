// io::OutputFile (see output_file.h): write-to-temporary, fsync, rename.
#include "io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "util/error.h"

namespace sluice::io {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBufferBytes = 64u << 10;  // text outputs write many short lines

std::string dir_of(const std::string& target) {
  const fs::path parent = fs::path(target).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// The process umask without changing it (umask(2) cannot be read without a
// write, which would race with other threads creating files).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return 022;
}

// A fresh hidden name beside the destination for the temporary file.
std::string temp_name(const std::string& target) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[40];
  std::snprintf(suffix, sizeof suffix, ".sluice-%d-%llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng() ^ counter.fetch_add(1)));
  return dir_of(target) + "/." + fs::path(target).filename().string() + suffix;
}

}  // namespace

OutputFile::OutputFile(std::string path, OutputOptions opts) : path_(std::move(path)), opts_(std::move(opts)) {
  if (path_.empty()) fail(opts_.flag.empty() ? "output" : opts_.flag, "no output file given");
  if (path_ == "-") {
    std::fflush(stdout);  // keep order with anything already printed through stdio
    fd_ = STDOUT_FILENO;
    return;
  }
  target_ = path_;
  struct stat lst {};
  if (::lstat(path_.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    const fs::path real = fs::canonical(path_, ec);
    if (!ec) target_ = real.string();
  }
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) fail_io("is a directory", 0);
  if (exists && !S_ISREG(st.st_mode)) {
    // A pipe, terminal or device: written in place, never replaced.
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) fail_io("cannot open for writing", errno);
    owns_fd_ = true;
    return;
  }
  check_not_input(target_);
  if (exists && !opts_.overwrite) fail_io("already exists (pass --force to overwrite it)", 0);

  renames_ = true;
  owns_fd_ = true;
  const mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~current_umask());
  // O_TMPFILE needs /proc/self/fd at commit to give the file a name.
  static const bool have_proc_fd = ::access("/proc/self/fd", X_OK) == 0;
  fd_ = have_proc_fd && opts_.anonymous_temp ? ::open(dir_of(target_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600) : -1;
  if (fd_ >= 0) {
    anonymous_ = true;
  } else {
    // No O_TMPFILE on this file system (or kernel): a named hidden file.
    std::string name = temp_name(target_);
    for (int attempt = 0; attempt < 16; ++attempt, name = temp_name(target_)) {
      fd_ = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd_ >= 0 || errno != EEXIST) break;
    }
    if (fd_ < 0) fail_io("cannot create a temporary file in " + dir_of(target_), errno);
    temp_ = name;
  }
  if (::fchmod(fd_, mode) != 0) {
    const int err = errno;
    discard();
    fail_io("cannot set the mode of the temporary file", err);
  }
  buffer_.reserve(kBufferBytes);
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() noexcept {
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  done_ = true;
}

void OutputFile::fail_io(const std::string& what, int err) const {
  const std::string where = opts_.flag.empty() ? path_ : opts_.flag + " " + path_;
  if (err == EPIPE && path_ == "-") throw StdoutClosed();
  fail(where, err != 0 ? what + ": " + std::strerror(err) : what);
}

void OutputFile::check_not_input(const std::string& target) const {
  struct stat out {};
  if (::stat(target.c_str(), &out) != 0) return;  // not there yet: cannot be an input
  for (const std::string& in : opts_.inputs) {
    struct stat st {};
    if (in.empty() || ::stat(in.c_str(), &st) != 0) continue;
    if (st.st_dev == out.st_dev && st.st_ino == out.st_ino)
      fail_io("is an input of this command (" + in + "); refusing to overwrite it, write the output to another file",
              0);
  }
}

void OutputFile::write(const void* data, size_t n) {
  if (done_) fail_io("internal: write after commit or failure", 0);
  if (buffer_.size() + n > kBufferBytes) flush_buffer();
  if (n >= kBufferBytes) {
    const char* p = static_cast<const char*>(data);
    for (size_t left = n; left > 0;) {
      const ssize_t k = ::write(fd_, p, std::min<size_t>(left, size_t{1} << 30));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        const int err = k < 0 ? errno : EIO;
        discard();
        fail_io("write failed", err);
      }
      p += k;
      left -= static_cast<size_t>(k);
    }
  } else {
    const char* c = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), c, c + n);
  }
  written_ += n;
}

void OutputFile::extend_with_zeros(uint64_t n) {
  if (done_) fail_io("internal: write after commit or failure", 0);
  if (!renames_) {  // a pipe or device: real zeros
    const std::vector<char> zeros(std::min<uint64_t>(n, kBufferBytes), 0);
    for (uint64_t left = n; left > 0;) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(left, zeros.size()));
      write(zeros.data(), k);
      left -= k;
    }
    return;
  }
  flush_buffer();
  const uint64_t end = written_ + n;
  if (::ftruncate(fd_, static_cast<off_t>(end)) != 0 || ::lseek(fd_, static_cast<off_t>(end), SEEK_SET) < 0) {
    const int err = errno;
    discard();
    fail_io("cannot extend the file to " + std::to_string(end) + " bytes", err);
  }
  written_ = end;
}

void OutputFile::flush_buffer() {
  size_t off = 0;
  while (off < buffer_.size()) {
    const ssize_t k = ::write(fd_, buffer_.data() + off, buffer_.size() - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      const int err = k < 0 ? errno : EIO;
      buffer_.clear();
      discard();
      fail_io("write failed", err);
    }
    off += static_cast<size_t>(k);
  }
  buffer_.clear();
}

void OutputFile::commit() {
  if (done_) fail_io("internal: commit after commit or failure", 0);
  flush_buffer();
  if (!renames_) {
    // A device or pipe: nothing to rename; close reports a deferred error.
    const int fd = fd_;
    fd_ = -1;
    done_ = true;
    if (owns_fd_ && ::close(fd) != 0 && errno != EINTR) fail_io("close failed", errno);
    return;
  }
  if (::fsync(fd_) != 0) {
    const int err = errno;
    discard();
    fail_io("fsync failed", err);
  }
  // The destination may have appeared or changed since construction.
  try {
    check_not_input(target_);
    struct stat st {};
    if (!opts_.overwrite && ::stat(target_.c_str(), &st) == 0)
      fail_io("already exists (pass --force to overwrite it)", 0);
  } catch (...) {
    discard();
    throw;
  }
  if (anonymous_) {
    // Give the anonymous file a name beside the destination, then rename it.
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    std::string name = temp_name(target_);
    int rc = -1;
    for (int attempt = 0; attempt < 16; ++attempt, name = temp_name(target_)) {
      rc = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW);
      if (rc == 0 || errno != EEXIST) break;
    }
    if (rc != 0) {
      const int err = errno;
      discard();
      fail_io("cannot link the finished temporary file into " + dir_of(target_), err);
    }
    temp_ = name;
  }
  if (::close(fd_) != 0 && errno != EINTR) {
    const int err = errno;
    fd_ = -1;
    discard();
    fail_io("close failed", err);
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    discard();
    fail_io("cannot rename the finished temporary file onto it", err);
  }
  temp_.clear();
  done_ = true;
  // Make the rename itself durable. Best effort: the output is complete and in
  // place already; some file systems refuse fsync on a directory.
  const int dfd = ::open(dir_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace sluice::io
