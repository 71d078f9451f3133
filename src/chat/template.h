// A parsed Jinja2 template and its renderer: the subset of jinja2 3.1 that
// model chat templates use, configured as transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, the {% generation %} tag).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "chat/value.h"

namespace sluice::chat {

// Bounds on one render, so that no template (a model file's, or a user's
// --chat-template) can hang the process, exhaust its memory or overflow the
// stack. Passing one throws sluice::Error "chat template: line N: ..."
// naming the limit. The defaults are far above what real chat templates need
// (the 68 in ../shared render each conversation in a few thousand steps, at
// most a few dozen levels deep; serve's largest request, 4096 messages, needs
// a few hundred thousand). The step bound is about a second of rendering.
struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string built
  size_t max_items = size_t{1} << 20;          // any one list built (range, `*`, ...)
  uint64_t max_steps = 4'000'000;              // statements run, expressions evaluated, loop iterations
  int max_depth = 500;                         // nested expressions, blocks and macro calls
};

class Template {
 public:
  // Throws sluice::Error "chat template: line N: ..." on a syntax error.
  explicit Template(const std::string& source, const LexOptions& opt = {});
  // Renders with `vars` as the template's globals (beside range, dict and
  // namespace). Throws sluice::Error on a runtime error (undefined attribute
  // access, a type error, a template's raise_exception).
  std::string render(const Dict& vars, const RenderLimits& limits = {}) const;

 private:
  Body body_;
};

}  // namespace sluice::chat
