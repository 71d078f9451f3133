// A parsed Jinja2 template and its renderer: the subset of jinja2 3.1 that
// model chat templates use, configured as transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, the {% generation %} tag).
#pragma once

#include <string>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "chat/value.h"

namespace sluice::chat {

class Template {
 public:
  // Throws sluice::Error "chat template: line N: ..." on a syntax error.
  explicit Template(const std::string& source, const LexOptions& opt = {});
  // Renders with `vars` as the template's globals (beside range, dict and
  // namespace). Throws sluice::Error on a runtime error (undefined attribute
  // access, a type error, a template's raise_exception).
  std::string render(const Dict& vars) const;

 private:
  Body body_;
};

}  // namespace sluice::chat
