#include "grammar/json_schema_prefix.h"

#include <algorithm>
#include <vector>

namespace sluice::grammar {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// How a value starting at some byte relates to the text: it cannot be what
// the schema asks (Fail), the text ends inside it and it may still become so
// (Eof), or it is whole and ends before byte `end` (Done).
enum class K { Fail, Eof, Done };
struct R {
  K k = K::Fail;
  size_t end = 0;
};
constexpr R kFail{K::Fail, 0};
constexpr R kEof{K::Eof, 0};
R done(size_t end) { return {K::Done, end}; }

class Matcher {
 public:
  Matcher(const JsonSchema& s, std::string_view t, size_t max_blank)
      : s_(s), t_(t), max_blank_(max_blank) {}

  // The whole text: a prefix of an accepted document (or, with
  // require_complete, one itself).
  bool check(bool require_complete) {
    size_t i = 0;
    if (!ws(i)) return false;
    if (i == t_.size()) return !require_complete;
    const R r = value(s_.root(), i, 0);
    if (r.k != K::Done) return r.k == K::Eof && !require_complete;
    i = r.end;
    return ws(i) && i == t_.size();
  }

 private:
  // A run of whitespace outside strings: with a cap, at most max_blank_
  // bytes and one line break (room for a pretty-printed document's
  // newline + indent, none for a model's endless blank lines).
  bool ws(size_t& i) const {
    size_t run = 0, newlines = 0;
    while (i < t_.size() && is_ws(t_[i])) {
      if (max_blank_ > 0 && (++run > max_blank_ || (t_[i] == '\n' && ++newlines > 1))) return false;
      ++i;
    }
    return true;
  }

  // node -1: any JSON value.
  R value(int node, size_t p, int depth) {
    if (depth > SchemaPrefix::kMaxDepth) return kFail;
    const SchemaNode* n = node >= 0 ? &s_.node(node) : nullptr;
    if (n && n->never) return kFail;
    if (p == t_.size()) return kEof;
    R r = base(n, p, depth);
    if (!n || r.k == K::Fail) return r;
    if (n->has_choices) r = choices(*n, p, r);
    if (r.k != K::Fail && n->ref >= 0) r = both(r, value(n->ref, p, depth + 1));
    if (r.k != K::Fail && !n->any_of.empty()) r = both(r, alternatives(*n, p, depth));
    return r;
  }

  static R both(R a, R b) {
    if (a.k == K::Done && b.k == K::Done && a.end == b.end) return a;
    if (a.k == K::Eof && b.k == K::Eof) return a;
    return kFail;
  }

  // anyOf/oneOf: a text running to the end beats a whole value (it may yet
  // be longer), a longer whole value beats a shorter one (a number that an
  // integer branch would cut at its '.').
  R alternatives(const SchemaNode& n, size_t p, int depth) {
    R best = kFail;
    std::vector<R> rs;
    for (int alt : n.any_of) {
      const R r = value(alt, p, depth + 1);
      rs.push_back(r);
      if (r.k == K::Eof)
        best = r;
      else if (r.k == K::Done && best.k != K::Eof && (best.k == K::Fail || r.end > best.end))
        best = r;
    }
    if (n.one_of && best.k == K::Done && std::count_if(rs.begin(), rs.end(), [&](R r) {
                                           return r.k == K::Done && r.end == best.end;
                                         }) > 1)
      return kFail;
    return best;
  }

  R choices(const SchemaNode& n, size_t p, R r) const {
    const std::string_view got = r.k == K::Done ? t_.substr(p, r.end - p) : t_.substr(p);
    for (const std::string& c : n.choices)
      if (r.k == K::Done ? got == c : std::string_view(c).substr(0, got.size()) == got) return r;
    return kFail;
  }

  R base(const SchemaNode* n, size_t p, int depth) {
    const uint8_t types = n ? n->types : SchemaNode::kAny;
    switch (t_[p]) {
      case '{':
        return types & SchemaNode::Object ? object(n, p, depth) : kFail;
      case '[':
        return types & SchemaNode::Array ? array(n, p, depth) : kFail;
      case '"':
        return types & SchemaNode::String ? string(p, nullptr) : kFail;
      case 't':
        return types & SchemaNode::Boolean ? literal(p, "true") : kFail;
      case 'f':
        return types & SchemaNode::Boolean ? literal(p, "false") : kFail;
      case 'n':
        return types & SchemaNode::Null ? literal(p, "null") : kFail;
      default:
        if (t_[p] != '-' && !is_digit(t_[p])) return kFail;
        if (types & SchemaNode::Number) return number(p, false);
        return types & SchemaNode::Integer ? number(p, true) : kFail;
    }
  }

  R literal(size_t p, std::string_view lit) const {
    for (size_t j = 0; j < lit.size(); ++j) {
      if (p + j == t_.size()) return kEof;
      if (t_[p + j] != lit[j]) return kFail;
    }
    return done(p + lit.size());
  }

  R number(size_t i, bool integer_only) const {
    auto digits = [&] {
      while (i < t_.size() && is_digit(t_[i])) ++i;
    };
    if (t_[i] == '-') ++i;
    if (i == t_.size()) return kEof;
    if (t_[i] == '0') {
      ++i;
    } else if (is_digit(t_[i])) {
      digits();
    } else {
      return kFail;
    }
    if (i == t_.size()) return kEof;
    if (integer_only) return done(i);
    if (t_[i] == '.') {
      if (++i == t_.size()) return kEof;
      if (!is_digit(t_[i])) return kFail;
      digits();
      if (i == t_.size()) return kEof;
    }
    if (t_[i] == 'e' || t_[i] == 'E') {
      if (++i == t_.size()) return kEof;
      if (t_[i] == '+' || t_[i] == '-') ++i;
      if (i == t_.size()) return kEof;
      if (!is_digit(t_[i])) return kFail;
      digits();
      if (i == t_.size()) return kEof;
    }
    return done(i);
  }

  // A string at p (the '"'); `out` (optional) gets its decoded bytes so far.
  R string(size_t p, std::string* out) const {
    size_t i = p + 1;
    int utf8_left = 0;
    while (true) {
      if (i == t_.size()) return kEof;
      const auto c = static_cast<uint8_t>(t_[i]);
      if (utf8_left > 0) {
        if ((c & 0xC0) != 0x80) return kFail;
        --utf8_left;
      } else if (c == '"') {
        return done(i + 1);
      } else if (c == '\\') {
        if (++i == t_.size()) return kEof;
        const char e = t_[i];
        static const std::string_view kEsc = "\"\\/bfnrt", kVal = "\"\\/\b\f\n\r\t";
        if (const size_t k = kEsc.find(e); k != std::string_view::npos) {
          if (out) out->push_back(kVal[k]);
          ++i;
          continue;
        }
        if (e != 'u') return kFail;
        for (int j = 1; j <= 4; ++j) {
          if (i + j == t_.size()) return kEof;
          if (!is_hex(t_[i + j])) return kFail;
        }
        if (out)
          out->append(t_.substr(i - 1, 6));  // names compare escaped: a model writes keys plainly
        i += 5;
        continue;
      } else if (c < 0x20) {
        return kFail;
      } else if (c >= 0x80) {
        if (c >= 0xC2 && c <= 0xDF)
          utf8_left = 1;
        else if (c >= 0xE0 && c <= 0xEF)
          utf8_left = 2;
        else if (c >= 0xF0 && c <= 0xF4)
          utf8_left = 3;
        else
          return kFail;
      }
      if (out) out->push_back(static_cast<char>(c));
      ++i;
    }
  }

  R object(const SchemaNode* n, size_t p, int depth) {
    std::vector<std::string> seen;
    auto unseen = [&](std::string_view prefix) {
      for (const auto& [name, node] : n->properties)
        if (name.compare(0, prefix.size(), prefix) == 0 &&
            std::find(seen.begin(), seen.end(), name) == seen.end())
          return true;
      return false;
    };
    auto close = [&](size_t i) {
      if (n)
        for (const std::string& r : n->required)
          if (std::find(seen.begin(), seen.end(), r) == seen.end()) return kFail;
      return done(i + 1);
    };
    size_t i = p + 1;
    bool after_comma = false;
    while (true) {
      if (!ws(i)) return kFail;
      if (i == t_.size()) return kEof;
      if (t_[i] == '}' && !after_comma) return close(i);
      if (t_[i] != '"') return kFail;
      std::string key;
      const R k = string(i, &key);
      if (k.k == K::Fail) return kFail;
      const bool closed_set = n && !n->additional;
      if (k.k == K::Eof) return !closed_set || unseen(key) ? kEof : kFail;
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) return kFail;
      int child = -1;
      bool known = false;
      if (n) {
        for (const auto& [name, node] : n->properties)
          if (name == key) {
            child = node;
            known = true;
          }
        if (!known && closed_set) return kFail;
        if (!known) child = n->additional_node;
      }
      seen.push_back(std::move(key));
      i = k.end;
      if (!ws(i)) return kFail;
      if (i == t_.size()) return kEof;
      if (t_[i] != ':') return kFail;
      ++i;
      if (!ws(i)) return kFail;
      const R v = value(child, i, depth + 1);
      if (v.k != K::Done) return v;
      i = v.end;
      if (!ws(i)) return kFail;
      if (i == t_.size()) return kEof;
      if (t_[i] == '}') return close(i);
      if (t_[i] != ',') return kFail;
      if (closed_set && !unseen("")) return kFail;  // no key could follow the comma
      after_comma = true;
      ++i;
    }
  }

  R array(const SchemaNode* n, size_t p, int depth) {
    const int64_t min = n ? n->min_items : 0, max = n ? n->max_items : -1;
    const int items = n ? n->items : -1;
    size_t i = p + 1;
    if (!ws(i)) return kFail;
    if (i == t_.size()) return kEof;
    if (t_[i] == ']') return min == 0 ? done(i + 1) : kFail;
    if (max == 0) return kFail;
    for (int64_t count = 1;; ++count) {
      const R v = value(items, i, depth + 1);
      if (v.k != K::Done) return v;
      i = v.end;
      if (!ws(i)) return kFail;
      if (i == t_.size()) return kEof;
      if (t_[i] == ']') return count >= min ? done(i + 1) : kFail;
      if (t_[i] != ',' || (max >= 0 && count >= max)) return kFail;
      ++i;
      if (!ws(i)) return kFail;
    }
  }

  const JsonSchema& s_;
  std::string_view t_;
  size_t max_blank_;
};

}  // namespace

bool SchemaPrefix::is_prefix(const JsonSchema& s, std::string_view text, size_t max_blank_run) {
  return Matcher(s, text, max_blank_run).check(false);
}

bool SchemaPrefix::accepts(const JsonSchema& s, std::string_view text) {
  // A trailing blank ends a top-level number, which the text alone leaves open.
  const std::string padded = std::string(text) + " ";
  return Matcher(s, padded, 0).check(true);
}

bool SchemaPrefix::push(std::string_view bytes) {
  if (failed_) return false;
  text_.append(bytes);
  complete_known_ = false;
  if (!is_prefix(*schema_, text_, max_blank_run_)) failed_ = true;
  return !failed_;
}

}  // namespace sluice::grammar
