// Reading the user's lines for `sluice chat`: libedit's line editing and
// history on a terminal, plain reads from a pipe or file. A line ending in a
// backslash continues on the next one (multi-line input).
#pragma once

#include <optional>
#include <string>

namespace sluice::cli {

class LineInput {
 public:
  LineInput();
  // The next (possibly multi-line) input; nullopt at end of input. A Ctrl-C
  // at the prompt gives an empty line (the chat goes on).
  std::optional<std::string> read(const char* prompt);

 private:
  std::optional<std::string> read_one(const char* prompt);
  bool tty_ = false;
};

}  // namespace sluice::cli
