#include "cli/escapes.h"

#include <cctype>

#include "util/error.h"

namespace sluice::cli {

std::string process_escapes(const std::string& s, const std::string& flag) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '"': out += '"'; break;
      case '\'': out += '\''; break;
      case 'x': {
        const auto hex = [&](size_t at) { return at < s.size() && std::isxdigit(static_cast<unsigned char>(s[at])); };
        if (!hex(i + 1) || !hex(i + 2))
          throw Error(flag + ": \\x needs two hex digits (at byte " + std::to_string(i - 1) + ")");
        out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
        break;
      }
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

}  // namespace sluice::cli
