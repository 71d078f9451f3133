// Jinja2's built-in filters and tests, and the Python methods templates call
// on strings, lists and dicts, with the semantics of jinja2 3.1 under
// transformers' ImmutableSandboxedEnvironment (mutating methods are refused).
#pragma once

#include <string>
#include <vector>

#include "chat/value.h"

namespace sluice::chat {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// Throws sluice::Error on a type error, as the filter would in Python.
Value apply_filter(const std::string& name, const Value& v, const Args& args);
bool apply_test(const std::string& name, const Value& v, const Args& args);

// `obj.name` / `obj[key]` as jinja2's sandbox resolves them: a bound method,
// a dict entry, a list element, or Undefined. Access through Undefined throws.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[a:b:c] (null or None bounds: Python's defaults).
Value get_slice(const Value& obj, const Value* a, const Value* b, const Value* c);

// The elements a for-loop or filter iterates (dict: keys; str: characters;
// Undefined: none). Throws for a non-iterable.
List iterate(const Value& v);
// A UTF-8 string split into code points (Python indexes str by code point).
std::vector<std::string> utf8_chars(const std::string& s);

}  // namespace sluice::chat
