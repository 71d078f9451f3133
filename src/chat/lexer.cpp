#include "chat/lexer.h"

#include <cctype>
#include <cstdlib>

#include "util/error.h"

namespace sluice::chat {
namespace {

[[noreturn]] void lex_fail(int line, const std::string& what) {
  throw Error("chat template: line " + std::to_string(line) + ": " + what);
}

std::string normalise(const std::string& src) {
  std::string s;
  s.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      s += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      s += src[k];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's string-literal escapes as jinja2 applies them.
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += static_cast<char>(cp);
  else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
  else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& opt) : s_(std::move(src)), opt_(opt) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      // Find the next tag opener.
      size_t p = pos_;
      size_t open = std::string::npos;
      while ((p = s_.find('{', p)) != std::string::npos) {
        if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) {
          open = p;
          break;
        }
        ++p;
      }
      std::string text = s_.substr(pos_, (open == std::string::npos ? s_.size() : open) - pos_);
      if (open == std::string::npos) {
        emit_text(text);
        break;
      }
      const char kind = s_[open + 1];
      const char sign = open + 2 < s_.size() ? s_[open + 2] : 0;
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool ws = l_pos < text.size();
          for (size_t k = l_pos; k < text.size(); ++k) ws = ws && is_space(text[k]);
          if (ws) text.resize(l_pos);
        }
      }
      emit_text(text);
      count_lines(pos_, open);
      pos_ = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t end = s_.find("#}", pos_);
        if (end == std::string::npos) lex_fail(line_, "unterminated comment");
        count_lines(pos_, end);
        const bool strip = end > pos_ && s_[end - 1] == '-';
        pos_ = end + 2;
        line_starting = finish_tag(strip, true);
        continue;
      }
      toks_.push_back({kind == '{' ? Token::Type::VarBegin : Token::Type::BlockBegin, "", 0, 0, line_});
      line_starting = lex_tag(kind);
    }
    toks_.push_back({Token::Type::Eof, "", 0, 0, line_});
    return std::move(toks_);
  }

 private:
  void emit_text(const std::string& t) {
    if (!t.empty()) toks_.push_back({Token::Type::Text, t, 0, 0, line_});
  }
  void count_lines(size_t from, size_t to) {
    for (size_t k = from; k < to && k < s_.size(); ++k) line_ += s_[k] == '\n';
  }
  // After a tag's closer (pos_ is just past it): applies `-` or trim_blocks.
  // Returns whether the consumed text ends in a newline (jinja2's line_starting).
  bool finish_tag(bool strip, bool is_block) {
    bool nl = false;
    if (strip) {
      while (pos_ < s_.size() && is_space(s_[pos_])) {
        nl = s_[pos_] == '\n';
        line_ += nl;
        ++pos_;
      }
    } else if (is_block && opt_.trim_blocks && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
      ++line_;
      nl = true;
    }
    return nl;
  }

  // Lexes expression tokens until the tag's closer; returns line_starting.
  bool lex_tag(char kind) {
    const std::string closer = kind == '{' ? "}}" : "%}";
    int depth = 0;  // open brackets: a "}}" inside a dict literal is not the closer
    for (;;) {
      while (pos_ < s_.size() && is_space(s_[pos_])) line_ += s_[pos_++] == '\n';
      if (pos_ >= s_.size()) lex_fail(line_, "unterminated tag");
      if (depth == 0) {
        const bool minus = s_.compare(pos_, 3, "-" + closer) == 0;
        const bool plus = kind == '%' && s_.compare(pos_, 3, "+" + closer) == 0;
        if (minus || plus || s_.compare(pos_, 2, closer) == 0) {
          pos_ += (minus || plus) ? 3 : 2;
          toks_.push_back({kind == '{' ? Token::Type::VarEnd : Token::Type::BlockEnd, "", 0, 0, line_});
          return finish_tag(minus, kind == '%');
        }
      }
      const char c = s_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
        toks_.push_back({Token::Type::Name, s_.substr(pos_, e - pos_), 0, 0, line_});
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "|",
                                    ".", ",", ":", "(", ")", "[", "]", "{", "}", "=", "!"};
        bool found = false;
        for (const char* op : ops) {
          const std::string o = op;
          if (s_.compare(pos_, o.size(), o) == 0) {
            if (o == "(" || o == "[" || o == "{") ++depth;
            if (o == ")" || o == "]" || o == "}") --depth;
            toks_.push_back({Token::Type::Op, o, 0, 0, line_});
            pos_ += o.size();
            found = true;
            break;
          }
        }
        if (!found) lex_fail(line_, std::string("unexpected character '") + c + "'");
      }
    }
  }

  void lex_number() {
    size_t e = pos_;
    bool is_float = false;
    while (e < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      is_float = true;
      ++e;
      while (e < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t f = e + 1;
      if (f < s_.size() && (s_[f] == '+' || s_[f] == '-')) ++f;
      if (f < s_.size() && std::isdigit(static_cast<unsigned char>(s_[f]))) {
        is_float = true;
        e = f;
        while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
      }
    }
    std::string num;
    for (size_t k = pos_; k < e; ++k)
      if (s_[k] != '_') num += s_[k];
    Token t{is_float ? Token::Type::Float : Token::Type::Int, num, 0, 0, line_};
    if (is_float) t.fval = std::strtod(num.c_str(), nullptr);
    else t.ival = std::strtoll(num.c_str(), nullptr, 10);
    toks_.push_back(t);
    pos_ = e;
  }

  void lex_string(char q) {
    std::string out;
    size_t k = pos_ + 1;
    for (;; ++k) {
      if (k >= s_.size()) lex_fail(line_, "unterminated string");
      const char c = s_[k];
      if (c == q) break;
      if (c == '\n') ++line_;
      if (c != '\\' || k + 1 >= s_.size()) {
        out += c;
        continue;
      }
      const char n = s_[++k];
      switch (n) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case 'a': out += '\a'; break;
        case '0': out += '\0'; break;
        case '\n': break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
          append_utf8(out, static_cast<uint32_t>(std::strtoul(s_.substr(k + 1, len).c_str(), nullptr, 16)));
          k += len;
          break;
        }
        default: out += '\\'; out += n;  // Python keeps unknown escapes verbatim
      }
    }
    toks_.push_back({Token::Type::String, out, 0, 0, line_});
    pos_ = k + 1;
  }

  std::string s_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> lex(const std::string& source, const LexOptions& opt) { return Lexer(normalise(source), opt).run(); }

}  // namespace sluice::chat
