#include "bench/flag_list.h"

#include <cctype>

#include "util/error.h"

namespace sluice::bench {

std::vector<std::string> split_flag_list(std::string_view csv, const std::string& flag) {
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = csv.find(',', pos);
    std::string_view part = csv.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!part.empty() && is_space(part.front())) part.remove_prefix(1);
    while (!part.empty() && is_space(part.back())) part.remove_suffix(1);
    if (part.empty()) fail(flag, "empty entry in list '" + std::string(csv) + "'");
    out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace sluice::bench
