// JSON text for every JSON writer (run/eval/bench/inspect --json, cache-sim,
// route traces, usage profiles, the server): model output and GGUF strings
// are bytes, not always UTF-8 (a token may end inside a character), and
// nlohmann's plain dump() throws type_error 316 on such a string. Invalid
// bytes are written as U+FFFD instead, so a writer never fails on its input.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sluice {

// j as JSON text: indent < 0 compact, else pretty with that many spaces.
template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace sluice
