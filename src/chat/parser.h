// Parses the token stream of lexer.h into a statement tree, with jinja2's
// operator precedence (filters and `is` tests bind tighter than arithmetic).
#pragma once

#include <string>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace sluice::chat {

// How deep a template may nest: blocks inside blocks, and the height of one
// expression's tree (`(((x)))`, `not not x`, `a ~ b ~ c ...` with that many
// terms). Real chat templates stay under 20; the bound keeps the parser, the
// interpreter and the tree's destructor off the end of the stack.
inline constexpr int kMaxTemplateNesting = 100;

// Throws sluice::Error "chat template: line N: ..." on a syntax error, on
// nesting deeper than kMaxTemplateNesting, or on an
// unknown tag. An unknown filter/test fails only when evaluated (jinja2 3
// defers that error when the filter sits under a condition, as the templates
// that use llama.cpp's from_json do).
Body parse_template(const std::string& source, const LexOptions& opt);

}  // namespace sluice::chat
