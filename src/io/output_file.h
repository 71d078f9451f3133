// io::OutputFile — the one way sluice writes an output file (logits, synth and
// repack models, routing traces, telemetry CSV, bench results).
//
// Contract (docs/reliability.md lists the tests that hold each point):
//  - Never replaces an input: a destination that is, by st_dev/st_ino, one of
//    `inputs` (the model and its split parts, a vocabulary, a prompt file) is
//    refused at construction and again just before commit.
//  - A regular-file destination (or a path that does not exist yet) is written
//    to an anonymous temporary file in the destination's directory (O_TMPFILE;
//    a hidden ".NAME.sluice-XXXXXX" file where the file system lacks it),
//    fsync'ed and renamed over the destination only by commit(). Until then
//    the destination is untouched; destroying an uncommitted OutputFile (an
//    error, an exception unwinding) removes the temporary file. A killed
//    process leaves the destination as it was (and, with O_TMPFILE, nothing
//    else). A symlink destination is resolved: its target is replaced.
//  - `overwrite = false` (a model output without --force) refuses a
//    destination that already exists.
//  - A destination that is not a regular file (a pipe, a terminal, a device
//    such as /dev/null or /dev/full, or "-" for stdout) is written directly
//    and never renamed; its write, flush and close errors still throw.
//  - Every failure throws sluice::Error "[FLAG ]PATH: what: strerror"; a write
//    to "-" whose reader has gone (EPIPE) throws StdoutClosed instead, which
//    the CLI turns into a quiet stop.
// Single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::io {

struct OutputOptions {
  std::string flag;                 // names the output in messages ("--route-trace"); may be empty
  std::vector<std::string> inputs;  // files the command reads (empty strings and missing files are skipped)
  bool overwrite = true;            // false: an existing destination is refused ("pass --force")
  bool anonymous_temp = true;       // false: always the named hidden file (tests of that fallback)
};

class OutputFile {
 public:
  // Checks the destination and creates the temporary file (or opens the
  // non-regular destination). Throws Error when refused or on failure.
  explicit OutputFile(std::string path, OutputOptions opts = {});
  ~OutputFile();  // without commit(): the temporary file is removed, the destination untouched
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Buffered; large writes go straight through. Throws on failure.
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }

  // Appends n zero bytes: on a regular destination by extending the file (a
  // hole, no disk space where the file system supports it), elsewhere written.
  void extend_with_zeros(uint64_t n);
  // Flushes; for a regular destination also fsyncs and renames the temporary
  // file onto it (then fsyncs the directory, best effort). Throws on failure,
  // after which the destination is untouched. Call once; writing after it throws.
  void commit();

  const std::string& path() const { return path_; }  // as given
  bool renames() const { return renames_; }            // regular destination: written via a temporary file
  uint64_t bytes_written() const { return written_; }

 private:
  [[noreturn]] void fail_io(const std::string& what, int err) const;
  void check_not_input(const std::string& target) const;
  void flush_buffer();
  void discard() noexcept;

  std::string path_;     // as given (messages)
  std::string target_;   // the file commit() replaces (symlinks resolved)
  OutputOptions opts_;
  int fd_ = -1;
  bool owns_fd_ = false;    // false for "-" (stdout is not ours to close)
  bool renames_ = false;
  bool anonymous_ = false;  // O_TMPFILE: linked into the directory only at commit
  std::string temp_;        // named temporary file (fallback), "" otherwise
  bool done_ = false;       // committed or failed for good
  std::vector<char> buffer_;
  uint64_t written_ = 0;
};

}  // namespace sluice::io
