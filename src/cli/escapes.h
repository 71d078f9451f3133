// `-e`: llama.cpp's escape processing for a prompt typed on one line.
#pragma once

#include <string>

namespace sluice::cli {

// Replaces \n \t \r \\ \" \' and \xNN (two hex digits) with the characters
// they stand for; any other backslash sequence is kept as typed (so a Windows
// path survives). Throws Error naming `flag` for a \x without two hex digits.
std::string process_escapes(const std::string& s, const std::string& flag);

}  // namespace sluice::cli
