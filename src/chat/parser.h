// Parses the token stream of lexer.h into a statement tree, with jinja2's
// operator precedence (filters and `is` tests bind tighter than arithmetic).
#pragma once

#include <string>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace sluice::chat {

// Throws sluice::Error "chat template: line N: ..." on a syntax error or an
// unknown tag. An unknown filter/test fails only when evaluated (jinja2 3
// defers that error when the filter sits under a condition, as the templates
// that use llama.cpp's from_json do).
Body parse_template(const std::string& source, const LexOptions& opt);

}  // namespace sluice::chat
