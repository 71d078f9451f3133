// The markers and tool-call readers of each OutputFormat (chat_output.h): the
// one definition the output parser (chat_output_stream.cpp) reads.
//
// Contract for the parser's incremental matching: within one set of markers
// searched together no marker contains another, so the earliest complete
// marker in a text never changes when more text arrives.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "chat_output/chat_output.h"

namespace sluice::chat_output {

struct ToolCallText {
  std::string name;
  std::string arguments;  // JSON text
};

// A tagged format: optional reasoning tags, calls between call_open and
// call_close, optionally all inside one section (section_begin..end).
struct TaggedSyntax {
  bool trim = true;  // content and reasoning lose surrounding whitespace
  std::string_view think_open, think_close;
  std::string_view section_begin, section_end;  // empty: calls stand in content
  std::string_view call_open, call_close;
  // The call in the text between call_open and call_close, or nullopt when it
  // is not one (outside a section it then stays content, as text).
  std::optional<ToolCallText> (*read_call)(std::string_view body) = nullptr;
};

// Think, Glm and DeepSeek; nullptr for Plain and Harmony.
const TaggedSyntax* tagged_syntax(OutputFormat format);

// gpt-oss harmony: [<|start|>assistant][ to=RECIPIENT]<|channel|>NAME[ TYPE]
// <|message|>BODY, ended by <|end|>, <|call|>, <|return|>, the next <|start|>
// or the end of the answer.
namespace harmony {
inline constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>",
                                  kConstrain = "<|constrain|>", kRecipient = " to=";
inline constexpr std::string_view kBodyEnds[] = {"<|end|>", "<|call|>", "<|return|>", kStart};
// What an answer that is in harmony format starts with.
inline constexpr std::string_view kHeaderStarts[] = {kStart, kChannel, kRecipient, kConstrain};

struct Header {
  std::string channel;    // "analysis", "final", "commentary", ...
  std::string function;   // the tool called (to=functions.NAME), or ""
};
Header read_header(std::string_view header);
}  // namespace harmony

// Arguments as the JSON text OpenAI puts in `arguments`: valid JSON is
// re-serialised compactly, anything else passed as it is (trimmed).
std::string json_arguments(std::string_view text);

}  // namespace sluice::chat_output
