#include "chat/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/error.h"

namespace sluice::chat {

const Value* Args::get(size_t index, const std::string& name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return index < pos.size() ? &pos[index] : nullptr;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      chat::List l;
      for (const auto& e : j) l.push_back(from_json(e));
      return make_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      chat::Dict d;
      for (const auto& [k, e] : j.items()) d.emplace_back(k, from_json(e));
      return make_dict(std::move(d));
    }
    default: return undefined();
  }
}

std::string dict_key(const Value& key) {
  if (key.kind == Value::Kind::String) return key.s;
  if (key.kind == Value::Kind::Int) return "\x01" + std::to_string(key.i);
  throw Error("chat template: only str and int dict keys are supported, not " + type_name(key));
}

Value key_value(const std::string& key) {
  if (!key.empty() && key[0] == '\x01') return Value::integer(std::strtoll(key.c_str() + 1, nullptr, 10));
  return Value::string(key);
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool Value::truthy() const {
  if (is_generator) return true;
  switch (kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0;
    case Kind::String: return !s.empty();
    case Kind::List: return !list->empty();
    case Kind::Dict: return !dict->empty();
    case Kind::Func: return true;
  }
  return false;
}

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  for (auto& [k, e] : *dict)
    if (k == key) {
      nest = std::max(nest, v.nest + 1);
      e = std::move(v);
      return;
    }
  nest = std::max(nest, v.nest + 1);
  dict->emplace_back(key, std::move(v));
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf = [-]D[.DDD]e[+-]XX: split into digits and exponent, then lay out as Python's repr.
  std::string s = buf;
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t k = 0; k < e; ++k)
    if (s[k] != '.') digits += s[k];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= -5 + 1 && exp < 16) {  // Python: fixed notation when -4 <= exp < 16
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (static_cast<int>(ip.size()) < exp + 1) ip += '0';
      std::string fp = static_cast<int>(digits.size()) > exp + 1 ? digits.substr(exp + 1) : "0";
      out = ip + "." + fp;
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

static std::string py_quote(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == q) out += std::string("\\") + static_cast<char>(q);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + q;
}

std::string repr(const Value& v) {
  if (v.kind == Value::Kind::String) return py_quote(v.s);
  return to_str(v);
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.b ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: return float_repr(v.f);
    case Value::Kind::String: return v.s;
    case Value::Kind::List: {
      if (v.is_generator) return "<generator object>";
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      if (v.is_tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::Dict: {
      if (v.is_namespace) return "<Namespace " + std::to_string(v.dict->size()) + ">";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : *v.dict) {
        out += (first ? "" : ", ") + repr(key_value(k)) + ": " + repr(e);
        first = false;
      }
      return out + "}";
    }
    case Value::Kind::Func: return "<function>";
  }
  return "";
}

static void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else out += static_cast<char>(c);
    }
  }
  out += '"';
}

namespace {
thread_local size_t t_max_string_bytes = SIZE_MAX;
}  // namespace

void check_string_bytes(size_t n, const char* what) {
  if (n > t_max_string_bytes)
    throw Error(std::string("chat template: ") + what + ": the string passes " +
                std::to_string(t_max_string_bytes) + " bytes");
}
StringBound::StringBound(size_t max_bytes) : saved_(t_max_string_bytes) {
  t_max_string_bytes = max_bytes;
}
StringBound::~StringBound() { t_max_string_bytes = saved_; }

static void dump(std::string& out, const Value& v, int indent, bool sort_keys, int depth) {
  check_string_bytes(out.size(), "tojson");
  if (depth > kMaxValueNesting)
    throw Error("chat template: tojson: nested deeper than " + std::to_string(kMaxValueNesting) +
                " levels (circular reference?)");
  const std::string nl = indent >= 0 ? "\n" : "";
  auto pad = [&](int d) { return indent >= 0 ? std::string(static_cast<size_t>(indent) * d, ' ') : ""; };
  const std::string item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.b ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.i); return;
    case Value::Kind::Float:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_repr(v.f);
      return;
    case Value::Kind::String: json_string(out, v.s); return;
    case Value::Kind::List: {
      if (v.is_generator) throw Error("chat template: tojson: Object of type generator is not JSON serializable");
      if (v.list->empty()) { out += "[]"; return; }
      out += "[" + nl;
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep + nl;
        out += pad(depth + 1);
        dump(out, (*v.list)[k], indent, sort_keys, depth + 1);
      }
      out += nl + pad(depth) + "]";
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict->empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& e : *v.dict) items.push_back(&e);
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{" + nl;
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep + nl;
        out += pad(depth + 1);
        json_string(out, to_str(key_value(items[k]->first)));
        out += ": ";
        dump(out, items[k]->second, indent, sort_keys, depth + 1);
      }
      out += nl + pad(depth) + "}";
      return;
    }
    default: throw Error("chat template: tojson: Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  dump(out, v, indent, sort_keys, 0);
  return out;
}

static bool equals_at(const Value& a, const Value& b, int depth) {
  using K = Value::Kind;
  if (depth > kMaxValueNesting)
    throw Error("chat template: ==: values nested deeper than " + std::to_string(kMaxValueNesting) +
                " levels (circular reference?)");
  if (a.is_number() && b.is_number()) {
    if (a.kind != K::Float && b.kind != K::Float) return (a.kind == K::Bool ? a.b : a.i) == (b.kind == K::Bool ? b.b : b.i);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.s == b.s;
    case K::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals_at((*a.list)[k], (*b.list)[k], depth + 1)) return false;
      return true;
    case K::Dict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, e] : *a.dict) {
        const Value* o = b.find(k);
        if (!o || !equals_at(e, *o, depth + 1)) return false;
      }
      return true;
    case K::Func: return a.fn == b.fn;
    default: return false;
  }
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

int compare(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind != K::Float && b.kind != K::Float) {
      const int64_t x = a.kind == K::Bool ? a.b : a.i, y = b.kind == K::Bool ? b.b : b.i;
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == K::String && b.kind == K::String) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  if (a.kind == K::List && b.kind == K::List) {
    for (size_t k = 0; k < a.list->size() && k < b.list->size(); ++k)
      if (int c = compare((*a.list)[k], (*b.list)[k])) return c;
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  throw Error("chat template: '<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Dict: return v.is_namespace ? "Namespace" : "dict";
    case Value::Kind::Func: return "function";
  }
  return "?";
}

}  // namespace sluice::chat
