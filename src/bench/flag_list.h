// The comma lists that bench flags take ("-p 64,512", "--lanes 1,4,16").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::bench {

// Splits "a, b,c" into its entries, white space around each trimmed. An empty
// entry ("1,,2", a trailing comma, an empty list) throws an Error naming `flag`.
std::vector<std::string> split_flag_list(std::string_view csv, const std::string& flag);

}  // namespace sluice::bench
