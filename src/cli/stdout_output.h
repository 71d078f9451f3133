// Checked writes to stdout, used by every subcommand for what it prints there.
//
// Policy (docs/reliability.md): SIGPIPE is ignored (main), so a write to a
// pipe whose reader has gone fails with EPIPE; that throws StdoutClosed and
// the command stops quietly with status 141. Any other failed write or flush
// (ENOSPC, EIO, /dev/full) throws Error("stdout: write failed: ..."), which
// main reports as one message and status 1. main calls close_stdout() after a
// successful command so that errors of the final flush and close surface too.
#pragma once

#include <string_view>

namespace sluice::cli {

void out(std::string_view s);
void outf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void flush_stdout();
void close_stdout();  // flush + close; call once, at exit

}  // namespace sluice::cli
