// MappingGuard: turns SIGBUS on a mapped model file into one clear message.
//
// Why: with --dense-weights mmap|warm the dense tensors are read straight
// from a MAP_SHARED file mapping. If the file is truncated (or replaced in
// place) while the engine runs, touching a page past the new end raises
// SIGBUS, which by default kills the process with no word about the cause.
//
// While a MappingGuard lives, a SIGBUS whose fault address lies inside its
// range prints "sluice: error: model file PATH changed or was truncated while
// mapped ..." on stderr and ends the process with _exit(kMappedFileExitCode).
// A SIGBUS anywhere else is passed to the handler that was installed before
// (the default action when there was none), so other faults still crash as
// they would have.
//
// The handler is async-signal-safe: it reads a fixed table of atomics and
// preformatted messages and calls only write(2) and _exit(2) (or sigaction to
// restore the previous action). Up to kMaxGuards ranges are guarded at once;
// a guard made past that limit guards nothing (guarded() tells), which only
// loses the message, never correctness.
//
// Thread-safety: guards may be made and destroyed from any thread.
#pragma once

#include <cstddef>
#include <string>

namespace sluice::io {

inline constexpr int kMappedFileExitCode = 1;  // the CLI's exit status for an Error
inline constexpr int kMaxGuards = 64;

class MappingGuard {
 public:
  // Guards [p, p + n), a mapping of `path`. n == 0 guards nothing.
  MappingGuard(const void* p, size_t n, const std::string& path);
  ~MappingGuard();
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;

  bool guarded() const { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

}  // namespace sluice::io
