#include "chat_output/gemma4_call.h"

#include <nlohmann/json.hpp>

#include "chat_output/chat_syntax.h"
#include "util/json_text.h"

namespace sluice::chat_output {
namespace {

constexpr std::string_view kQuote = "<|\"|>";
constexpr int kMaxDepth = 64;  // nesting bound: model text is untrusted

// A recursive-descent reader over the call body; every method leaves `at`
// after what it read and returns false on a syntax error.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  size_t at = 0;

  bool value(nlohmann::json& out, int depth) {
    if (depth > kMaxDepth) return false;
    skip_space();
    if (s_.substr(at).starts_with(kQuote)) return string(out);
    if (at < s_.size() && s_[at] == '{') return object(out, depth);
    if (at < s_.size() && s_[at] == '[') return array(out, depth);
    // A bare literal runs to the next delimiter.
    const size_t end = s_.find_first_of(",}]", at);
    const std::string_view lit = trim(s_.substr(at, end == std::string_view::npos ? s_.size() - at : end - at));
    if (lit.empty()) return false;
    at = end == std::string_view::npos ? s_.size() : end;
    const nlohmann::json parsed = nlohmann::json::parse(lit, nullptr, false);
    out = parsed.is_discarded() || parsed.is_object() || parsed.is_array() ? nlohmann::json(std::string(lit)) : parsed;
    return true;
  }

  bool object(nlohmann::json& out, int depth) {
    ++at;  // '{'
    out = nlohmann::json::object();
    skip_space();
    if (at < s_.size() && s_[at] == '}') return ++at, true;
    for (;;) {
      skip_space();
      std::string key;
      if (s_.substr(at).starts_with(kQuote)) {
        nlohmann::json k;
        if (!string(k)) return false;
        key = k.get<std::string>();
      } else {
        const size_t colon = s_.find(':', at);
        if (colon == std::string_view::npos) return false;
        key = std::string(trim(s_.substr(at, colon - at)));
        at = colon;
      }
      skip_space();
      if (key.empty() || at >= s_.size() || s_[at] != ':') return false;
      ++at;
      nlohmann::json v;
      if (!value(v, depth + 1)) return false;
      out[key] = std::move(v);
      const Next n = after_item('}');
      if (n != Next::More) return n == Next::Closed;
    }
  }

  bool at_end() {
    skip_space();
    return at == s_.size();
  }

 private:
  bool string(nlohmann::json& out) {
    at += kQuote.size();
    const size_t end = s_.find(kQuote, at);
    if (end == std::string_view::npos) return false;
    out = std::string(s_.substr(at, end - at));
    at = end + kQuote.size();
    return true;
  }

  bool array(nlohmann::json& out, int depth) {
    ++at;  // '['
    out = nlohmann::json::array();
    skip_space();
    if (at < s_.size() && s_[at] == ']') return ++at, true;
    for (;;) {
      nlohmann::json v;
      if (!value(v, depth + 1)) return false;
      out.push_back(std::move(v));
      const Next n = after_item(']');
      if (n != Next::More) return n == Next::Closed;
    }
  }

  // After an object member or array element: a ',' (another item follows),
  // the container's `close` (consumed), or anything else (malformed).
  enum class Next { More, Closed, Bad };
  Next after_item(char close) {
    skip_space();
    if (at < s_.size() && s_[at] == ',') return ++at, Next::More;
    if (at < s_.size() && s_[at] == close) return ++at, Next::Closed;
    return Next::Bad;
  }

  void skip_space() {
    while (at < s_.size() && (s_[at] == ' ' || s_[at] == '\n' || s_[at] == '\t' || s_[at] == '\r')) ++at;
  }

  static std::string_view trim(std::string_view v) {
    const size_t a = v.find_first_not_of(" \t\r\n");
    if (a == std::string_view::npos) return {};
    return v.substr(a, v.find_last_not_of(" \t\r\n") - a + 1);
  }

  std::string_view s_;
};

}  // namespace

std::optional<ToolCallText> read_gemma4_call(std::string_view body) {
  constexpr std::string_view kCall = "call:";
  const size_t start = body.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos || !body.substr(start).starts_with(kCall)) return std::nullopt;
  const size_t name_at = start + kCall.size();
  const size_t brace = body.find('{', name_at);
  if (brace == std::string_view::npos) return std::nullopt;
  std::string name(body.substr(name_at, brace - name_at));
  if (name.empty() || name.find_first_of(" \t\r\n") != std::string::npos) return std::nullopt;
  Reader r(body);
  r.at = brace;
  nlohmann::json args;
  if (!r.object(args, 0) || !r.at_end()) return std::nullopt;
  // Strings are model bytes, not always UTF-8: invalid bytes become U+FFFD.
  return ToolCallText{std::move(name), json_text(args)};
}

}  // namespace sluice::chat_output
