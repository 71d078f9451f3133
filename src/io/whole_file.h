// read_whole_file: the whole of a small input file (a prompt, a routing
// trace, a token list) read through io::File.
//
// Why through File rather than an ifstream: reads then share the engine's one
// retry loop (io/read_fully.h: bounded EINTR, short reads continued, errors
// naming the file and offset) and can be fault-injected with the same
// io::WrapFile hook as the model files.
#pragma once

#include <cstdint>
#include <string>

#include "io/file.h"

namespace sluice::io {

// Returns the file's bytes. Throws Error naming `path` when it cannot be
// opened or read, or when it is larger than max_bytes (a guard against, say,
// a model file given where a prompt was expected). `wrap` (optional) wraps
// the opened file before it is read.
std::string read_whole_file(const std::string& path, uint64_t max_bytes, const WrapFile& wrap = {});

}  // namespace sluice::io
