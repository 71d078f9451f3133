// Gemma 4's tool-call text, as its chat template writes calls (and the model
// answers in kind): call:NAME{KEY:VALUE,...}, where a string is delimited by
// <|"|> on both sides, objects are {KEY:VALUE,...} (keys bare, or <|"|>-quoted
// where the template escapes them), arrays [VALUE,...], and numbers, true,
// false and null stand bare.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sluice::chat_output {

struct ToolCallText;

// The call in `body` (the text between <|tool_call> and <tool_call|>) with its
// arguments as compact JSON text, or nullopt when it is not one (bad syntax,
// unbalanced brackets, text after the closing brace). Never throws.
std::optional<ToolCallText> read_gemma4_call(std::string_view body);

}  // namespace sluice::chat_output
