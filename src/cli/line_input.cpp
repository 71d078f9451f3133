#include "cli/line_input.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <editline/readline.h>

namespace sluice::cli {

LineInput::LineInput() : tty_(::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO)) {}

std::optional<std::string> LineInput::read_one(const char* prompt) {
  if (!tty_) {
    std::string line;
    if (!std::getline(std::cin, line)) return std::nullopt;
    return line;
  }
  char* raw = ::readline(prompt);
  if (raw == nullptr) return std::nullopt;
  std::string line(raw);
  std::free(raw);
  if (!line.empty()) ::add_history(line.c_str());
  return line;
}

std::optional<std::string> LineInput::read(const char* prompt) {
  std::optional<std::string> line = read_one(prompt);
  if (!line) return std::nullopt;
  std::string text = *line;
  while (!text.empty() && text.back() == '\\') {
    text.back() = '\n';
    std::optional<std::string> more = read_one("... ");
    if (!more) break;
    text += *more;
  }
  return text;
}

}  // namespace sluice::cli
