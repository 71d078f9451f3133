#include "util/csv.h"

namespace sluice {

std::string csv_field(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_join(std::span<const std::string> fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    out += csv_field(fields[i]);
  }
  return out;
}

std::string csv_join(std::initializer_list<std::string> fields) {
  return csv_join(std::span<const std::string>(fields.begin(), fields.size()));
}

}  // namespace sluice
