// libFuzzer target for grammar/json_prefix: arbitrary bytes, fed whole and
// byte by byte. Never crash; the two feedings agree; the verdict on the whole
// input agrees with nlohmann::json (one JSON object), except on inputs where
// nlohmann stops at a number too large for a double (a range error there,
// valid grammar here).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "grammar/json_prefix.h"

namespace {

std::optional<bool> oracle(const std::string& s) {
  // A NUL byte is never valid JSON (not whitespace; a control character in a
  // string), but nlohmann's lexer takes it for the end of the input.
  if (s.find('\0') != std::string::npos) return false;
  try {
    return nlohmann::json::parse(s).is_object();
  } catch (const nlohmann::json::out_of_range&) {
    return std::nullopt;  // nlohmann stops at the number: no verdict on the rest
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  if (s.rfind("\xEF\xBB\xBF", 0) == 0) return 0;  // nlohmann skips a UTF-8 BOM; JSON text has none
  sluice::grammar::JsonPrefix whole;
  const bool ok = whole.push(s);
  sluice::grammar::JsonPrefix bytes;
  size_t valid_prefix = 0;
  while (valid_prefix < size && bytes.push_byte(data[valid_prefix])) ++valid_prefix;
  if (ok != (valid_prefix == size) || (ok && whole.complete() != bytes.complete())) std::abort();
  const std::optional<bool> want = oracle(s);
  if (want && (ok && whole.complete()) != *want) std::abort();
  return 0;
}
