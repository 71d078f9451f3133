// The value model of the chat-template interpreter: what a Jinja2 expression
// evaluates to. It mirrors the Python objects jinja2 works on (None, bool,
// int, float, str, list, dict, callables, Undefined) closely enough that
// printing and tojson give the bytes Python would.
//
// Contract: lists and dicts are shared by reference (Python semantics: a
// list appended to through one name is seen through another); scalars copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::chat {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion-ordered, like a Python dict

// Call arguments: positional, then keyword (in call order).
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The keyword `name`, else the positional at `index`, else nullptr.
  const Value* get(size_t index, const std::string& name) const;
};
using Func = std::function<Value(Args&)>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Func };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // String payload; for Undefined, the missing name (for messages)
  std::shared_ptr<chat::List> list;
  std::shared_ptr<chat::Dict> dict;
  std::shared_ptr<Func> fn;
  bool is_namespace = false;  // a namespace(): the one dict whose attributes can be assigned
  // A List that stands for a Python generator/iterator (what map, select,
  // items... return): iterable, but has no len(), is always truthy and is not
  // JSON serializable, exactly as in jinja2.
  bool is_generator = false;
  // A String that is markupsafe.Markup (from the `safe` filter): `+` with a
  // plain str HTML-escapes the plain side, as jinja2 does even without autoescape.
  bool is_safe = false;
  bool is_tuple = false;  // a List that Python holds as a tuple: prints as (a, b)
  // How deep the items nest: 0 for a scalar, 1 + the deepest item's for a
  // list or dict when it was made (a namespace's grows when set() is called
  // on this Value, not on a copy). The interpreter bounds it
  // (kMaxValueNesting), so that printing or destroying a value built in a
  // loop (`{% set ns.l = [ns.l] %}`) never runs off the stack.
  int nest = 0;

  static Value undefined(std::string name = "") { Value v; v.s = std::move(name); return v; }
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::String; v.s = std::move(x); return v; }
  static Value make_list(chat::List x = {}) {
    Value v;
    v.kind = Kind::List;
    for (const auto& e : x) v.nest = std::max(v.nest, e.nest + 1);
    v.list = std::make_shared<chat::List>(std::move(x));
    return v;
  }
  static Value make_dict(chat::Dict x = {}) {
    Value v;
    v.kind = Kind::Dict;
    for (const auto& e : x) v.nest = std::max(v.nest, e.second.nest + 1);
    v.dict = std::make_shared<chat::Dict>(std::move(x));
    return v;
  }
  static Value function(Func x) {
    Value v; v.kind = Kind::Func; v.fn = std::make_shared<Func>(std::move(x)); return v;
  }
  static Value tuple(chat::List x) { Value v = make_list(std::move(x)); v.is_tuple = true; return v; }
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(kind == Kind::Bool ? b : i); }

  // Python truthiness (Undefined is falsy).
  bool truthy() const;
  // Dict lookup; nullptr when absent.
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Dict keys are strings; an int key (a `{0: ...}` literal) is stored as
// "\x01" + its decimal digits. dict_key/key_value convert between the two.
std::string dict_key(const Value& key);  // throws for keys other than str/int
Value key_value(const std::string& key);

// markupsafe.escape: & < > " ' as HTML entities.
std::string html_escape(const std::string& s);

// str(x) as Python prints it ({{ x }}); Undefined prints empty.
std::string to_str(const Value& v);
// repr(x) (used for items inside printed lists/dicts).
std::string repr(const Value& v);
// Python's float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16".
std::string float_repr(double d);
// json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=...) with the
// default separators (", ", ": ") or (",", ": ") when indented (indent < 0: none).
std::string to_json(const Value& v, int indent, bool sort_keys = false);
// Values nest at most this deep where they are serialised or compared: only
// a namespace that holds itself (`{% set ns.me = ns %}`) goes deeper, and
// there Python fails too ("Circular reference detected", RecursionError).
// Past it: sluice::Error, never a stack overflow.
inline constexpr int kMaxValueNesting = 256;

// The most bytes one string built during a render may hold: the running
// render's RenderLimits::max_output_bytes, set for the calling thread by a
// StringBound for the render's length (unbounded outside one). The builtins
// that build a string in a loop (join, replace, indent, tojson) check it as
// they go, so a multiplying one fails before it allocates the product.
void check_string_bytes(size_t n, const char* what);  // throws sluice::Error past it
class StringBound {
 public:
  explicit StringBound(size_t max_bytes);
  ~StringBound();
  StringBound(const StringBound&) = delete;
  StringBound& operator=(const StringBound&) = delete;

 private:
  size_t saved_;
};

// Python ==.
bool equals(const Value& a, const Value& b);
// Python <: -1/0/1; throws sluice::Error for unorderable types.
int compare(const Value& a, const Value& b);
// The Python type name, for messages.
std::string type_name(const Value& v);

}  // namespace sluice::chat
