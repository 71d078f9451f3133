// Splits a Jinja2 template into tokens: raw text, tag delimiters and the
// expression tokens inside tags. Whitespace control is applied here, as
// jinja2's lexer does: `-` strips, `+` keeps, and with trim_blocks the first
// newline after a block/comment tag is dropped; with lstrip_blocks the
// spaces/tabs before a block/comment tag on its own line are dropped. Newlines
// are normalised to "\n" and one trailing newline is removed
// (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::chat {

struct Token {
  enum class Type { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
  Type type;
  std::string text;  // Text/Name/String payload (strings unescaped), or the operator
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws sluice::Error "chat template: line N: ..." on an unterminated tag or string.
std::vector<Token> lex(const std::string& source, const LexOptions& opt);

}  // namespace sluice::chat
