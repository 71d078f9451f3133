// Bounded reading of a text input named on the command line (a prompt file,
// an evaluation text): the whole file, or all of stdin for "-".
//
// Contract: a path must name a regular file (a directory, /dev/zero, a FIFO
// are refused before reading) of at most `limit` bytes; stdin is read up to
// `limit` bytes and refused beyond. Every open or read error (EIO, ...) throws
// sluice::Error "FLAG PATH: ..." — a read error is never a shorter text.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::io {

// 64 MiB: two orders of magnitude above any prompt or evaluation text sluice
// is used with (wikitext-2's test split is 1.3 MB), far below memory.
inline constexpr uint64_t kMaxTextInputBytes = uint64_t{64} << 20;

std::string read_text_input(const std::string& path, const std::string& flag, uint64_t limit = kMaxTextInputBytes);

}  // namespace sluice::io
