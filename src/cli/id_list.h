// Parsing of token-id lists given on the command line ("1,17,42" or "1 17 42").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/error.h"

namespace sluice::cli {

// Ids separated by commas and/or spaces. Each must be in [0, limit); errors
// name `flag`. An empty list is an error.
inline std::vector<int32_t> parse_id_list(const std::string& s, const std::string& flag,
                                          int64_t limit = int64_t{0x7fffffff} + 1) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ',' || s[i] == ' ') {
      ++i;
      continue;
    }
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s.substr(i), &used);
    } catch (const std::exception&) {
      throw Error(flag + ": expected comma-separated token ids, got '" + s + "'");
    }
    if (v < 0 || v >= limit) {
      throw Error(flag + ": token id " + std::to_string(v) + " is out of range" +
                  (limit <= 0x7fffffff ? " (vocab has " + std::to_string(limit) + " tokens)" : std::string()));
    }
    ids.push_back(static_cast<int32_t>(v));
    i += used;
  }
  if (ids.empty()) throw Error(flag + ": no token ids given");
  return ids;
}

}  // namespace sluice::cli
