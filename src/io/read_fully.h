// The one positional-read retry loop of sluice: every read of model bytes
// (GGUF header parse, O_DIRECT probe, dense load, expert reads; PosixFile,
// FdFile and FaultFile) goes through read_once / read_fully.
//
// EINTR and EAGAIN are retried, but at most kMaxInterrupts times in a row:
// a source that keeps failing that way (a signal storm, a broken FUSE or
// network filesystem, an injected fault) ends in an Error instead of a
// silent endless loop. Any progress resets the count.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace sluice::io {

// One raw positional read attempt: returns the bytes read (0 at end of file)
// or -errno. Injectable so the retry loop can be tested with faults.
using RawPread = std::function<ssize_t(void* dst, size_t n, uint64_t offset)>;

// Consecutive EINTR/EAGAIN results tolerated before giving up.
inline constexpr int kMaxInterrupts = 1000;

// pread(2) on fd as a RawPread.
RawPread fd_pread(int fd);

// One read: calls `raw` until it returns something other than EINTR/EAGAIN,
// at most kMaxInterrupts + 1 times. Returns the bytes read (may be short; 0
// at end of file) or -errno (-EINTR/-EAGAIN when the retries ran out).
ssize_t read_once(const RawPread& raw, void* dst, size_t n, uint64_t offset);

// Fills all n bytes through read_once, continuing after short reads. Throws
// Error("PATH: read of N bytes at offset X failed: CAUSE") on an error, on
// too many interruptions, or on end-of-file before n bytes.
void read_fully(const RawPread& raw, const std::string& path, void* dst, size_t n,
                uint64_t offset);

// Throws Error("PATH: read of N bytes at offset X failed: CAUSE"), the one
// wording of every read failure.
[[noreturn]] void read_failed(const std::string& path, size_t n, uint64_t offset, const std::string& cause);

}  // namespace sluice::io
