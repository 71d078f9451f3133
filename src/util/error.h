// sluice::Error — the one exception type for bad input and I/O failure.
//
// Contract: the message is complete and user-facing ("FILE: problem"), so the
// CLI prints e.what() verbatim and exits non-zero. Code deep in the engine
// throws; only the CLI catches.
#pragma once

#include <stdexcept>
#include <string>

namespace sluice {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Builds "<where>: <what>" — use for anything tied to a file, flag or tensor.
[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

}  // namespace sluice
