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

// The reader of stdout went away (EPIPE: a closed pager, `| head`). Not a
// failure of sluice: the CLI stops quietly (no message) with status 141, what
// a shell reports for a process ended by SIGPIPE. Outputs not yet committed
// are discarded, as for a killed run.
class StdoutClosed : public Error {
 public:
  StdoutClosed() : Error("stdout: the reader closed the pipe") {}
};

// Builds "<where>: <what>" — use for anything tied to a file, flag or tensor.
[[noreturn]] inline void fail(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}

}  // namespace sluice
