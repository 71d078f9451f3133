// CSV rows as RFC 4180 reads them: a field holding a comma, a double quote, CR
// or LF is enclosed in double quotes with its quotes doubled; any other field
// is written as is. Every CSV writer (--csv, bench -o csv) builds rows here.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace sluice {

std::string csv_field(std::string_view field);
// The fields quoted as needed and joined by commas; no line end.
std::string csv_join(std::span<const std::string> fields);
std::string csv_join(std::initializer_list<std::string> fields);

}  // namespace sluice
