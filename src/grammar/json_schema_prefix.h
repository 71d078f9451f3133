// Prefix checking against a compiled JSON Schema (grammar/json_schema.h):
// whether a text can still be extended into one JSON document (optional
// whitespace, a value, optional whitespace) that the schema accepts, and
// whether it already is one.
//
// push() appends bytes and re-checks the whole text (a recursive-descent
// pass: JSON's value boundaries are fixed by its syntax, so every anyOf
// branch that accepts a value ends it at the same byte, and one pass
// decides). The cost is linear in the text per check, which the sampler's
// constraint pays per candidate token: fine for the structured answers this
// is for. max_blank_run > 0 caps whitespace runs outside strings at that
// many bytes and one newline, so a model cannot pad forever.
//
// What is checked while a value is still open: types, the characters of
// strings, numbers and literals (UTF-8 lead/continuation structure, escapes),
// property names (with additionalProperties false, a partial name must start
// an allowed, unused one; duplicates are refused), maxItems, and enum/const
// texts by prefix. What is checked when a value closes: required, minItems,
// enum/const as a whole, oneOf's "exactly one". A $ref cycle that consumes
// no input, or nesting past kMaxDepth, matches nothing.
//
// The state is the text plus a shared schema: copy it to try a continuation.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grammar/json_schema.h"

namespace sluice::grammar {

class SchemaPrefix {
 public:
  static constexpr int kMaxDepth = 128;

  SchemaPrefix(std::shared_ptr<const JsonSchema> schema, size_t max_blank_run = 0)
      : schema_(std::move(schema)), max_blank_run_(max_blank_run) {}

  // False once the text can no longer become an accepted document; it then
  // stays failed.
  bool push(std::string_view bytes);
  // Computed on first ask (a candidate tried and dropped never pays for it).
  bool complete() const {
    if (!complete_known_) complete_ = !failed_ && accepts(*schema_, text_);
    complete_known_ = true;
    return complete_;
  }
  bool failed() const { return failed_; }
  const std::string& text() const { return text_; }

  // One-shot checks of a whole text.
  static bool is_prefix(const JsonSchema& s, std::string_view text, size_t max_blank_run = 0);
  static bool accepts(const JsonSchema& s, std::string_view text);

 private:
  std::shared_ptr<const JsonSchema> schema_;
  size_t max_blank_run_ = 0;
  std::string text_;
  bool failed_ = false;
  mutable bool complete_ = false, complete_known_ = false;
};

}  // namespace sluice::grammar
