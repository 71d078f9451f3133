// Planning reads of a byte range into a 4 KiB-aligned buffer.
//
// Both weight stores lay a file range out in memory as its aligned cover:
// the buffer holds file bytes [align_down(off), align_up(off+n)) so the range
// itself starts at dst + off % 4096. That layout is the same whether the reads
// are O_DIRECT (which needs it) or buffered (which reads just the range), so
// callers compute pointers once and never care which path ran.
//
// Internal to the moe layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/aligned_buffer.h"
#include "io/file.h"

namespace sluice::moe {

// The two ways to read one split file. `direct` is null when O_DIRECT is off
// or refused; `buffered` is always set (it also reads the unaligned tail at
// end of file, which O_DIRECT cannot).
struct SplitFiles {
  std::shared_ptr<const io::File> direct;
  std::shared_ptr<const io::File> buffered;
  int fd = -1;  // of the underlying buffered file, for posix_fadvise (-1: unknown)
};

struct PlannedRead {
  const io::File* file = nullptr;
  uint8_t* dst = nullptr;
  size_t n = 0;
  uint64_t offset = 0;
};

// Bytes of the aligned cover of [offset, offset+bytes).
inline uint64_t cover_bytes(uint64_t offset, uint64_t bytes) {
  return io::align_up(offset + bytes) - io::align_down(offset);
}

// Appends to `out` the reads that bring [offset, offset+bytes) into `dst`
// (4 KiB aligned, at least cover_bytes long), split into pieces of at most
// max_chunk bytes (a multiple of 4 KiB) so several lanes can share one range.
// Returns where the range's first byte will be.
uint8_t* plan_covering_read(const SplitFiles& f, uint64_t offset, uint64_t bytes, uint8_t* dst,
                            uint64_t max_chunk, std::vector<PlannedRead>& out);

// Opens `path` for the stores: buffered always, O_DIRECT too when `want_direct`
// and the filesystem allows it (direct stays null where it is refused). Both
// are passed through `wrap` when it is set (fault injection).
// Throws Error naming the path when the file cannot be opened.
SplitFiles open_split_files(const std::string& path, bool want_direct, const io::WrapFile& wrap = {});

}  // namespace sluice::moe
