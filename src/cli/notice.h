// Notice lines on stderr: what the user should know but did not ask for
// (a habit flag that does nothing here, an environment fallback in force, a
// random seed, a context that ran full). `-q/--quiet` silences them; errors
// are not notices and always print (main).
#pragma once

#include <string>

namespace sluice::cli {

// Set once by -q/--quiet while the command line is parsed.
void set_quiet(bool quiet);
bool quiet();

// Writes `line` and a newline to stderr unless quiet. Callers spell the
// prefix ("sluice: ...", "cache: ...") as they always have.
void notice(const std::string& line);

}  // namespace sluice::cli
