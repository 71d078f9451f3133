#include "chat/builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "util/error.h"

namespace sluice::chat {
namespace {

using K = Value::Kind;

[[noreturn]] void fail(const std::string& what) { throw Error("chat template: " + what); }

[[noreturn]] void undefined_error(const Value& u) {
  fail(u.s.empty() ? std::string("value is undefined") : "'" + u.s + "' is undefined");
}

bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto in_set = [&](char c) {
    if (!chars || chars->kind == K::None) return is_ws(static_cast<unsigned char>(c));
    return chars->s.find(c) != std::string::npos;
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && in_set(s[b])) ++b;
  if (right)
    while (e > b && in_set(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string title(const std::string& s) {  // Python str.title: upper after a non-letter
  std::string out = s;
  bool prev_alpha = false;
  for (auto& c : out) {
    const bool a = std::isalpha(static_cast<unsigned char>(c));
    c = static_cast<char>(a && !prev_alpha ? std::toupper(static_cast<unsigned char>(c))
                                           : std::tolower(static_cast<unsigned char>(c)));
    prev_alpha = a;
  }
  return out;
}
std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` between characters
    auto ch = utf8_chars(s);
    for (size_t k = 0; k < ch.size(); ++k) {
      if (count < 0 || static_cast<int64_t>(k) < count) out += to;
      out += ch[k];
      check_string_bytes(out.size(), "replace");
    }
    if (count < 0 || static_cast<int64_t>(ch.size()) < count) out += to;
    return out;
  }
  size_t p = 0;
  int64_t n = 0;
  for (size_t f; (count < 0 || n < count) && (f = s.find(from, p)) != std::string::npos; ++n) {
    out += s.substr(p, f - p) + to;
    check_string_bytes(out.size(), "replace");
    p = f + from.size();
  }
  return out + s.substr(p);
}
List split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (!sep || sep->kind == K::None) {
    size_t p = 0;
    for (;;) {
      while (p < s.size() && is_ws(s[p])) ++p;
      if (p >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > p && is_ws(s[e - 1])) --e;
        out.push_back(Value::string(s.substr(p, e - p)));
        break;
      }
      size_t e = p;
      while (e < s.size() && !is_ws(s[e])) ++e;
      out.push_back(Value::string(s.substr(p, e - p)));
      p = e;
    }
    return out;
  }
  if (sep->s.empty()) fail("split: empty separator");
  size_t p = 0;
  for (size_t f; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) && (f = s.find(sep->s, p)) != std::string::npos;) {
    out.push_back(Value::string(s.substr(p, f - p)));
    p = f + sep->s.size();
  }
  out.push_back(Value::string(s.substr(p)));
  return out;
}
List rsplit(const std::string& s, const std::string& sep, int64_t maxsplit) {
  List out;
  size_t e = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (e < sep.size()) break;
    const size_t f = s.rfind(sep, e - sep.size());
    if (f == std::string::npos) break;
    out.insert(out.begin(), Value::string(s.substr(f + sep.size(), e - f - sep.size())));
    e = f;
  }
  out.insert(out.begin(), Value::string(s.substr(0, e)));
  return out;
}

// A width of padding (indent, tojson's indent): negative is none, as
// Python's ' ' * n; more than kMaxPadWidth is refused before it is allocated.
constexpr int64_t kMaxPadWidth = 1 << 16;
size_t pad_width(int64_t w, const char* what) {
  if (w > kMaxPadWidth)
    fail(std::string(what) + ": width " + std::to_string(w) + " is over the limit of " +
         std::to_string(kMaxPadWidth));
  return static_cast<size_t>(std::max<int64_t>(w, 0));
}

// int(f) for the int filter: NaN gives the default (Python's ValueError,
// which jinja2 catches); a float outside int64 is an error, never UB.
Value float_to_int(double f, const Value& dflt) {
  if (std::isnan(f)) return dflt;
  if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
    fail("int: " + float_repr(f) + " does not fit a 64-bit integer");
  return Value::integer(static_cast<int64_t>(f));
}

int64_t to_int(const Value& v, const char* what) {
  if (v.kind == K::Int) return v.i;
  if (v.kind == K::Bool) return v.b;
  fail(std::string(what) + ": expected an integer, got " + type_name(v));
}

// Python str.format with {} / {N} / {name} fields (no format specs).
std::string format(const std::string& fmt, const Args& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '{' && k + 1 < fmt.size() && fmt[k + 1] == '{') { out += '{'; ++k; continue; }
    if (c == '}' && k + 1 < fmt.size() && fmt[k + 1] == '}') { out += '}'; ++k; continue; }
    if (c != '{') { out += c; continue; }
    const size_t e = fmt.find('}', k);
    if (e == std::string::npos) fail("format: unmatched '{'");
    const std::string field = fmt.substr(k + 1, e - k - 1);
    const Value* v = nullptr;
    if (field.empty()) v = auto_idx < args.pos.size() ? &args.pos[auto_idx++] : nullptr;
    else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t n = 0;  // digits past the arguments' count mean no argument (no overflow, no throw)
      for (size_t d = 0; d < field.size() && n <= args.pos.size(); ++d)
        n = std::isdigit(static_cast<unsigned char>(field[d]))
                ? n * 10 + static_cast<size_t>(field[d] - '0')
                : args.pos.size();
      v = n < args.pos.size() ? &args.pos[n] : nullptr;
    } else {
      for (const auto& [name, val] : args.kw)
        if (name == field) v = &val;
    }
    if (!v) fail("format: no argument for field '{" + field + "}'");
    out += to_str(*v);
    check_string_bytes(out.size(), "format");
    k = e;
  }
  return out;
}

Value generator(List items) {
  Value v = Value::make_list(std::move(items));
  v.is_generator = true;
  return v;
}

Value bound(Func f) { return Value::function(std::move(f)); }

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.s;
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bound([s, name](Args& a) {
      return Value::string(strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
    });
  if (name == "split" || name == "rsplit")
    return bound([s, name](Args& a) {
      const Value* sep = a.get(0, "sep");
      const Value* m = a.get(1, "maxsplit");
      const int64_t maxsplit = m ? to_int(*m, "split") : -1;
      if (name == "rsplit" && sep && sep->kind == K::String) return Value::make_list(rsplit(s, sep->s, maxsplit));
      return Value::make_list(split(s, sep, maxsplit));
    });
  if (name == "startswith" || name == "endswith")
    return bound([s, name](Args& a) {
      const Value* p = a.get(0, "prefix");
      if (!p) fail(name + ": missing argument");
      List cands = p->kind == K::List ? *p->list : List{*p};
      for (const auto& c : cands) {
        if (c.kind != K::String) fail(name + ": expected a string");
        if (name == "startswith" ? s.compare(0, c.s.size(), c.s) == 0
                                 : s.size() >= c.s.size() && s.compare(s.size() - c.s.size(), c.s.size(), c.s) == 0)
          return Value::boolean(true);
      }
      return Value::boolean(false);
    });
  if (name == "upper") return bound([s](Args&) { return Value::string(upper(s)); });
  if (name == "lower") return bound([s](Args&) { return Value::string(lower(s)); });
  if (name == "title") return bound([s](Args&) { return Value::string(title(s)); });
  if (name == "capitalize")
    return bound([s](Args&) { return Value::string(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1))); });
  if (name == "replace")
    return bound([s](Args& a) {
      const Value* f = a.get(0, "old");
      const Value* t = a.get(1, "new");
      const Value* c = a.get(2, "count");
      if (!f || !t || f->kind != K::String || t->kind != K::String) fail("replace: expected two strings");
      return Value::string(replace(s, f->s, t->s, c ? to_int(*c, "replace") : -1));
    });
  if (name == "format") return bound([s](Args& a) { return Value::string(format(s, a)); });
  if (name == "find" || name == "count" || name == "rfind")
    return bound([s, name](Args& a) {
      const Value* sub = a.get(0, "sub");
      if (!sub || sub->kind != K::String) fail(name + ": expected a string");
      if (name == "count") {
        if (sub->s.empty()) return Value::integer(static_cast<int64_t>(utf8_chars(s).size()) + 1);
        int64_t n = 0;
        for (size_t p = 0; (p = s.find(sub->s, p)) != std::string::npos; p += sub->s.size()) ++n;
        return Value::integer(n);
      }
      const size_t p = name == "find" ? s.find(sub->s) : s.rfind(sub->s);
      return Value::integer(p == std::string::npos ? -1 : static_cast<int64_t>(utf8_chars(s.substr(0, p)).size()));
    });
  if (name == "join")
    return bound([s](Args& a) {
      const Value* l = a.get(0, "iterable");
      if (!l) fail("join: missing argument");
      std::string out;
      bool first = true;
      for (const auto& e : iterate(*l)) {
        if (e.kind != K::String) fail("join: sequence item is " + type_name(e) + ", not str");
        out += (first ? "" : s) + e.s;
        check_string_bytes(out.size(), "join");
        first = false;
      }
      return Value::string(out);
    });
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isupper" || name == "islower")
    return bound([s, name](Args&) {
      if (s.empty()) return Value::boolean(false);
      bool ok = true, cased = false;
      for (unsigned char c : s) {
        if (name == "isdigit") ok = ok && std::isdigit(c);
        else if (name == "isalpha") ok = ok && std::isalpha(c);
        else if (name == "isspace") ok = ok && is_ws(c);
        else if (name == "isupper") { ok = ok && !std::islower(c); cased = cased || std::isupper(c); }
        else { ok = ok && !std::isupper(c); cased = cased || std::islower(c); }
      }
      return Value::boolean(ok && (name.rfind("is", 0) == 0 && (name == "isupper" || name == "islower") ? cased : true));
    });
  if (name == "splitlines")
    return bound([s](Args&) {
      List out;
      size_t p = 0;
      while (p < s.size()) {
        size_t e = s.find('\n', p);
        if (e == std::string::npos) e = s.size();
        std::string line = s.substr(p, e - p);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        out.push_back(Value::string(line));
        p = e + 1;
      }
      return Value::make_list(std::move(out));
    });
  return Value::undefined(name);
}

const std::set<std::string> kMutators = {"append", "pop", "insert", "extend", "remove", "clear", "update",
                                         "setdefault", "popitem", "sort", "reverse", "add", "discard"};

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "get")
    return bound([obj](Args& a) {
      const Value* k = a.get(0, "key");
      if (!k) fail("get: missing key");
      const Value* d = a.get(1, "default");
      const Value* v = k->kind == K::String ? obj.find(k->s) : nullptr;
      return v ? *v : d ? *d : Value::none();
    });
  if (name == "items")
    return bound([obj](Args&) {
      List out;
      for (const auto& [k, v] : *obj.dict) out.push_back(Value::tuple({key_value(k), v}));
      return Value::make_list(std::move(out));
    });
  if (name == "keys")
    return bound([obj](Args&) {
      List out;
      for (const auto& kv : *obj.dict) out.push_back(key_value(kv.first));
      return Value::make_list(std::move(out));
    });
  if (name == "values")
    return bound([obj](Args&) {
      List out;
      for (const auto& kv : *obj.dict) out.push_back(kv.second);
      return Value::make_list(std::move(out));
    });
  if (name == "copy") return bound([obj](Args&) { return Value::make_dict(*obj.dict); });
  return Value::undefined(name);
}

Value list_method(const Value& obj, const std::string& name) {
  if (name == "index")
    return bound([obj](Args& a) {
      const Value* x = a.get(0, "value");
      for (size_t k = 0; x && k < obj.list->size(); ++k)
        if (equals((*obj.list)[k], *x)) return Value::integer(static_cast<int64_t>(k));
      fail("index: value is not in list");
    });
  if (name == "count")
    return bound([obj](Args& a) {
      const Value* x = a.get(0, "value");
      int64_t n = 0;
      for (const auto& e : *obj.list) n += x && equals(e, *x);
      return Value::integer(n);
    });
  return Value::undefined(name);
}

// Python slice indices, clamped as list[a:b:c] does.
List slice_of(const List& l, const Value* a, const Value* b, const Value* c) {
  const int64_t n = static_cast<int64_t>(l.size());
  const int64_t step = c && c->kind != K::None ? to_int(*c, "slice") : 1;
  if (step == 0) fail("slice step cannot be zero");
  auto norm = [&](const Value* v, int64_t dflt) {
    if (!v || v->kind == K::None) return dflt;
    int64_t x = to_int(*v, "slice");
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = norm(a, step > 0 ? 0 : n - 1), stop = norm(b, step > 0 ? n : -1);
  List out;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(l[static_cast<size_t>(k)]);
  return out;
}

const Value* attr_path(const Value& v, const std::string& path, Value& holder) {
  holder = v;
  size_t p = 0;
  while (p <= path.size()) {
    size_t e = path.find('.', p);
    if (e == std::string::npos) e = path.size();
    const std::string part = path.substr(p, e - p);
    if (holder.is_undefined()) return nullptr;
    if (!part.empty() && std::isdigit(static_cast<unsigned char>(part[0])) && holder.kind == K::List)
      holder = get_item(holder, Value::integer(std::stoll(part)));
    else
      holder = get_attr(holder, part);
    p = e + 1;
  }
  return &holder;
}

Args args_from(const Args& a, size_t skip) {
  Args out;
  for (size_t k = skip; k < a.pos.size(); ++k) out.pos.push_back(a.pos[k]);
  out.kw = a.kw;
  return out;
}

bool kw_bool(const Args& a, size_t idx, const char* name, bool dflt) {
  const Value* v = a.get(idx, name);
  return v ? v->truthy() : dflt;
}

// The sort key of jinja2's sort/dictsort/unique/min/max: lower-cased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == K::String) return Value::string(lower(v.s));
  return v;
}

std::string indent_text(std::string s, const Value* width, bool first, bool blank) {
  std::string ind =
      width && width->kind == K::String
          ? width->s
          : std::string(pad_width(width ? to_int(*width, "indent") : 4, "indent"), ' ');
  s += "\n";
  std::vector<std::string> ls;
  {  // Python splitlines on "\n"-normalised text
    size_t p = 0;
    while (p < s.size()) {
      size_t e = s.find('\n', p);
      if (e == std::string::npos) e = s.size();
      ls.push_back(s.substr(p, e - p));
      p = e + 1;
    }
  }
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < ls.size(); ++k) {
      rv += (k ? "\n" + ind : "") + ls[k];
      check_string_bytes(rv.size(), "indent");
    }
  } else {
    rv = ls.empty() ? "" : ls[0];
    for (size_t k = 1; k < ls.size(); ++k) {
      rv += "\n" + (ls[k].empty() ? ls[k] : ind + ls[k]);
      check_string_bytes(rv.size(), "indent");
    }
  }
  return first ? ind + rv : rv;
}

}  // namespace

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    const unsigned char c = s[k];
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    out.push_back(s.substr(k, len));
    k += len;
  }
  return out;
}

List iterate(const Value& v) {
  switch (v.kind) {
    case K::Undefined: return {};
    case K::List: return *v.list;
    case K::Dict: {
      List out;
      for (const auto& kv : *v.dict) out.push_back(key_value(kv.first));
      return out;
    }
    case K::String: {
      List out;
      for (auto& c : utf8_chars(v.s)) out.push_back(Value::string(c));
      return out;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (kMutators.count(name) && (obj.kind == K::List || obj.kind == K::Dict) && !obj.is_namespace)
    fail("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
  switch (obj.kind) {
    case K::Dict: {
      if (!obj.is_namespace && (name == "get" || name == "items" || name == "keys" || name == "values" || name == "copy"))
        return dict_method(obj, name);
      const Value* v = obj.find(name);
      return v ? *v : Value::undefined(name);
    }
    case K::String: return string_method(obj, name);
    case K::List: return list_method(obj, name);
    default: return Value::undefined(name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.kind == K::Dict) {
    if (key.kind == K::String) {
      const Value* v = obj.find(key.s);
      return v ? *v : get_attr(obj, key.s);
    }
    const Value* v = key.kind == K::Int ? obj.find(dict_key(key)) : nullptr;
    return v ? *v : Value::undefined();
  }
  if ((obj.kind == K::List || obj.kind == K::String) && (key.kind == K::Int || key.kind == K::Bool)) {
    const List l = obj.kind == K::List ? List() : iterate(obj);
    const List& src = obj.kind == K::List ? *obj.list : l;
    int64_t k = to_int(key, "index");
    if (k < 0) k += static_cast<int64_t>(src.size());
    if (k < 0 || k >= static_cast<int64_t>(src.size())) return Value::undefined();
    return src[static_cast<size_t>(k)];
  }
  if (key.kind == K::String) return get_attr(obj, key.s);
  return Value::undefined();
}

Value get_slice(const Value& obj, const Value* a, const Value* b, const Value* c) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.kind == K::List) return Value::make_list(slice_of(*obj.list, a, b, c));
  if (obj.kind == K::String) {
    std::string out;
    for (const auto& e : slice_of(iterate(obj), a, b, c)) out += e.s;
    return Value::string(out);
  }
  fail("'" + type_name(obj) + "' object is not subscriptable");
}

static const std::set<std::string> kFilters = {
    "abs", "attr", "batch", "capitalize", "count", "d", "default", "dictsort", "first", "float", "format", "indent", "int",
    "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse",
    "round", "safe", "select", "selectattr", "sort", "string", "striptags", "sum", "title", "tojson", "trim", "unique",
    "upper", "wordcount", "e", "escape", "center", "truncate", "pprint", "urlencode", "wordwrap", "xmlattr", "filesizeformat",
    "forceescape", "groupby", "random", "slice", "urlize"};
static const std::set<std::string> kTests = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter", "float", "ge",
    "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan", "lower", "lt", "mapping", "ne", "none", "number",
    "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper", "==", "!=", "<", ">", "<=", ">="};

bool has_filter(const std::string& name) { return kFilters.count(name) > 0; }
bool has_test(const std::string& name) { return kTests.count(name) > 0; }

bool apply_test(const std::string& name, const Value& v, const Args& args) {
  if (!has_test(name)) fail("no test named '" + name + "'");
  const Value* arg = args.get(0, "value");
  auto need = [&]() -> const Value& {
    if (!arg) fail("test '" + name + "' needs an argument");
    return *arg;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.kind == K::None;
  if (name == "string") return v.kind == K::String;
  if (name == "mapping") return v.kind == K::Dict && !v.is_namespace;
  if (name == "iterable") return v.kind == K::Undefined || v.kind == K::String || v.kind == K::List || v.kind == K::Dict;
  if (name == "sequence") return v.kind == K::Undefined || v.kind == K::String || v.kind == K::List || (v.kind == K::Dict && !v.is_namespace);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.b;
  if (name == "false") return v.kind == K::Bool && !v.b;
  if (name == "callable") return v.kind == K::Func;
  if (name == "lower") return v.kind == K::String && v.s == lower(v.s);
  if (name == "upper") return v.kind == K::String && v.s == upper(v.s);
  if (name == "odd" || name == "even") {
    const int64_t x = to_int(v, name.c_str());
    return ((x % 2) != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = to_int(need(), "divisibleby");
    if (d == 0) fail("divisibleby: division by zero");
    return to_int(v, "divisibleby") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, need());
  if (name == "ne" || name == "!=") return !equals(v, need());
  if (name == "sameas") {
    const Value& o = need();
    if (v.kind != o.kind) return false;
    if (v.kind == K::List) return v.list == o.list;
    if (v.kind == K::Dict) return v.dict == o.dict;
    return equals(v, o);
  }
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, need()) < 0;
  if (name == "le" || name == "<=") return compare(v, need()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, need()) > 0;
  if (name == "ge" || name == ">=") return compare(v, need()) >= 0;
  if (name == "in") {
    const Value& c = need();
    if (c.kind == K::String) {
      if (v.kind != K::String) fail("'in <string>' requires string as left operand, not " + type_name(v));
      return c.s.find(v.s) != std::string::npos;
    }
    for (const auto& e : iterate(c))
      if (equals(e, v)) return true;
    return false;
  }
  fail("test '" + name + "' is not supported");
}

Value apply_filter(const std::string& name, const Value& v, const Args& a) {
  if (!has_filter(name)) fail("no filter named '" + name + "'");
  if (name == "default" || name == "d") {
    const Value* dv = a.get(0, "default_value");
    const bool boolean = kw_bool(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dv ? *dv : Value::string("");
    return v;
  }
  if (name == "safe" || name == "e" || name == "escape") {
    if (name == "safe") {
      Value m = Value::string(to_str(v));
      m.is_safe = true;
      return m;
    }
    fail("filter '" + name + "' is not supported");
  }
  if (name == "tojson") {
    const Value* ind = a.get(1, "indent");
    int indent = -1;
    if (ind && ind->kind != K::None)
      indent = static_cast<int>(pad_width(to_int(*ind, "tojson"), "tojson"));
    if (v.is_undefined()) fail("tojson: Object of type Undefined is not JSON serializable");
    return Value::string(to_json(v, indent, kw_bool(a, 4, "sort_keys", false)));
  }
  if (name == "string") return Value::string(to_str(v));
  if (name == "length" || name == "count") {
    if (v.kind == K::String) return Value::integer(static_cast<int64_t>(utf8_chars(v.s).size()));
    if (v.kind == K::List && v.is_generator) fail("object of type 'generator' has no len()");
    if (v.kind == K::List) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.kind == K::Dict) return Value::integer(static_cast<int64_t>(v.dict->size()));
    if (v.is_undefined()) return Value::integer(0);
    fail("object of type '" + type_name(v) + "' has no len()");
  }
  if (name == "trim") return Value::string(strip(to_str(v), a.get(0, "chars"), true, true));
  if (name == "upper") return Value::string(upper(to_str(v)));
  if (name == "lower") return Value::string(lower(to_str(v)));
  if (name == "title") return Value::string(title(to_str(v)));
  if (name == "capitalize") {
    const std::string s = to_str(v);
    return Value::string(s.empty() ? s : upper(s.substr(0, 1)) + lower(s.substr(1)));
  }
  if (name == "replace") {
    const Value* f = a.get(0, "old");
    const Value* t = a.get(1, "new");
    const Value* c = a.get(2, "count");
    if (!f || !t) fail("replace: expected two arguments");
    return Value::string(replace(to_str(v), to_str(*f), to_str(*t), c && c->kind != K::None ? to_int(*c, "replace") : -1));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& e : iterate(v)) {
      Value h;
      const Value& x = attr ? *attr_path(e, to_str(*attr), h) : e;
      out += (first ? "" : sep ? to_str(*sep) : "") + to_str(x);
      check_string_bytes(out.size(), "join");
      first = false;
    }
    return Value::string(out);
  }
  if (name == "first" || name == "last") {
    List l = iterate(v);
    if (l.empty()) return Value::undefined();
    return name == "first" ? l.front() : l.back();
  }
  if (name == "list") return Value::make_list(iterate(v));
  if (name == "reverse") {
    if (v.kind == K::String) {
      auto ch = utf8_chars(v.s);
      std::string out;
      for (auto it = ch.rbegin(); it != ch.rend(); ++it) out += *it;
      return Value::string(out);
    }
    List l = iterate(v);
    std::reverse(l.begin(), l.end());
    return generator(std::move(l));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (v.kind != K::Dict) fail("items: can only get item pairs from a mapping");
    List out;
    for (const auto& [k, e] : *v.dict) out.push_back(Value::tuple({key_value(k), e}));
    return generator(std::move(out));
  }
  if (name == "dictsort") {
    if (v.kind != K::Dict) fail("dictsort: expected a mapping");
    const bool cs = kw_bool(a, 0, "case_sensitive", false);
    const Value* by = a.get(1, "by");
    const bool by_value = by && to_str(*by) == "value";
    const bool rev = kw_bool(a, 2, "reverse", false);
    List out;
    for (const auto& [k, e] : *v.dict) out.push_back(Value::tuple({key_value(k), e}));
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
      const int c = compare(sort_key((*x.list)[by_value], cs), sort_key((*y.list)[by_value], cs));
      return rev ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(out));
  }
  if (name == "sort") {
    const bool rev = kw_bool(a, 0, "reverse", false);
    const bool cs = kw_bool(a, 1, "case_sensitive", false);
    const Value* attr = a.get(2, "attribute");
    List l = iterate(v);
    std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
      Value hx, hy;
      const Value& kx = attr ? *attr_path(x, to_str(*attr), hx) : x;
      const Value& ky = attr ? *attr_path(y, to_str(*attr), hy) : y;
      const int c = compare(sort_key(kx, cs), sort_key(ky, cs));
      return rev ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(l));
  }
  if (name == "unique") {
    const bool cs = kw_bool(a, 0, "case_sensitive", false);
    const Value* attr = a.get(1, "attribute");
    List out, seen;
    for (const auto& e : iterate(v)) {
      Value h;
      Value key = sort_key(attr ? *attr_path(e, to_str(*attr), h) : e, cs);
      bool dup = false;
      for (const auto& s : seen) dup = dup || equals(s, key);
      if (!dup) {
        seen.push_back(key);
        out.push_back(e);
      }
    }
    return generator(std::move(out));
  }
  if (name == "min" || name == "max") {
    const bool cs = kw_bool(a, 0, "case_sensitive", false);
    const Value* attr = a.get(1, "attribute");
    List l = iterate(v);
    if (l.empty()) return Value::undefined();
    size_t best = 0;
    for (size_t k = 1; k < l.size(); ++k) {
      Value hx, hy;
      const int c = compare(sort_key(attr ? *attr_path(l[k], to_str(*attr), hx) : l[k], cs),
                            sort_key(attr ? *attr_path(l[best], to_str(*attr), hy) : l[best], cs));
      if (name == "min" ? c < 0 : c > 0) best = k;
    }
    return l[best];
  }
  if (name == "sum") {
    Value acc = Value::integer(0);
    for (const auto& e : iterate(v)) {
      if (!e.is_number()) fail("sum: unsupported operand");
      if (acc.kind == K::Float || e.kind == K::Float) acc = Value::number(acc.as_double() + e.as_double());
      else acc = Value::integer(acc.i + (e.kind == K::Bool ? e.b : e.i));
    }
    return acc;
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name.size() > 6;
    const bool want = name.rfind("select", 0) == 0;
    const size_t test_at = by_attr ? 1 : 0;
    const Value* attr = by_attr ? a.get(0, "attribute") : nullptr;
    if (by_attr && !attr) fail(name + ": missing attribute");
    const Value* test = test_at < a.pos.size() ? &a.pos[test_at] : nullptr;
    if (test && !has_test(to_str(*test))) fail("no test named '" + to_str(*test) + "'");
    const Args targs = args_from(a, test_at + 1);
    List out;
    for (const auto& e : v.truthy() ? iterate(v) : List()) {  // jinja2: a falsy sequence selects nothing
      Value h;
      const Value& x = attr ? *attr_path(e, to_str(*attr), h) : e;
      const bool ok = test ? apply_test(to_str(*test), x, targs) : x.truthy();
      if (ok == want) out.push_back(e);
    }
    return generator(std::move(out));
  }
  if (name == "map") {
    if (!v.truthy()) return generator({});
    const Value* attr = nullptr;
    for (const auto& [k, e] : a.kw)
      if (k == "attribute") attr = &e;
    List out;
    if (attr) {
      const Value* dflt = nullptr;
      for (const auto& [k, e] : a.kw)
        if (k == "default") dflt = &e;
      for (const auto& e : iterate(v)) {
        Value h;
        const Value* x = attr_path(e, to_str(*attr), h);
        out.push_back(x && !x->is_undefined() ? *x : dflt ? *dflt : Value::undefined(to_str(*attr)));
      }
    } else {
      if (a.pos.empty()) fail("map: expected a filter name or attribute=");
      const std::string f = to_str(a.pos[0]);
      if (!has_filter(f)) fail("no filter named '" + f + "'");
      const Args fargs = args_from(a, 1);
      for (const auto& e : iterate(v)) out.push_back(apply_filter(f, e, fargs));
    }
    return generator(std::move(out));
  }
  if (name == "attr") {
    const Value* n = a.get(0, "name");
    return n ? get_attr(v, to_str(*n)) : Value::undefined();
  }
  if (name == "int") {
    const Value* d = a.get(0, "default");
    const Value dv = d ? *d : Value::integer(0);
    if (v.kind == K::Int) return v;
    if (v.kind == K::Bool) return Value::integer(v.b);
    if (v.kind == K::Float) return float_to_int(v.f, dv);
    if (v.kind == K::String) {
      const std::string s = strip(v.s, nullptr, true, true);
      char* end = nullptr;
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end && *end == 0) return Value::integer(x);
      const double f = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0) return float_to_int(f, dv);
    }
    return dv;
  }
  if (name == "float") {
    const Value* d = a.get(0, "default");
    if (v.is_number()) return Value::number(v.as_double());
    if (v.kind == K::String) {
      const std::string s = strip(v.s, nullptr, true, true);
      char* end = nullptr;
      const double f = std::strtod(s.c_str(), &end);
      if (!s.empty() && end && *end == 0) return Value::number(f);
    }
    return d ? *d : Value::number(0);
  }
  if (name == "abs") {
    if (v.kind == K::Int && v.i == std::numeric_limits<int64_t>::min())
      fail("abs: integer overflow (template integers are 64-bit)");
    if (v.kind == K::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == K::Float) return Value::number(std::fabs(v.f));
    fail("abs: bad operand type " + type_name(v));
  }
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    const Value* m = a.get(1, "method");
    const int64_t prec = p ? to_int(*p, "round") : 0;
    const std::string method = m ? to_str(*m) : "common";
    const double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_double() * scale;
    x = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
    return Value::number(x / scale);
  }
  if (name == "wordcount") return Value::integer(static_cast<int64_t>(split(to_str(v), nullptr, -1).size()));
  if (name == "indent")
    return Value::string(indent_text(to_str(v), a.get(0, "width"), kw_bool(a, 1, "first", false), kw_bool(a, 2, "blank", false)));
  if (name == "batch") {
    const Value* n = a.get(0, "linecount");
    const Value* fill = a.get(1, "fill_with");
    const int64_t size = n ? to_int(*n, "batch") : 1;
    if (size <= 0) fail("batch: size must be positive");
    List out, cur;
    for (const auto& e : iterate(v)) {
      cur.push_back(e);
      if (static_cast<int64_t>(cur.size()) == size) {
        out.push_back(Value::make_list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (fill)
        while (static_cast<int64_t>(cur.size()) < size) cur.push_back(*fill);
      out.push_back(Value::make_list(std::move(cur)));
    }
    return generator(std::move(out));
  }
  if (name == "striptags") {
    std::string s = to_str(v), out;
    bool in_tag = false;
    for (char c : s) {
      if (c == '<') in_tag = true;
      else if (c == '>' && in_tag) in_tag = false;
      else if (!in_tag) out += c;
    }
    List words = split(out, nullptr, -1);
    std::string joined;
    for (size_t k = 0; k < words.size(); ++k) joined += (k ? " " : "") + words[k].s;
    return Value::string(joined);
  }
  fail("filter '" + name + "' is not supported");
}

}  // namespace sluice::chat
