// The incremental form of parse_output (chat_output.h): the answer's text
// arrives in pieces and each push() returns the reasoning, content and
// complete tool calls that are now certain.
//
// Contract: for any split of a text into pieces, appending every push()
// result and then finish()'s gives exactly parse_output(text) (parse_output
// is this parser fed the whole text). Text is held back only while it could
// still be the start of a marker (or, with trimming, while it is whitespace
// that may end a part), while it is a harmony message header, or while it is
// inside a tool call not yet closed: a call is returned once complete. Chunks of content and reasoning end where
// the pieces end or before a marker, so UTF-8-complete pieces give
// UTF-8-complete chunks (markers start with ASCII).
#pragma once

#include <string>
#include <string_view>

#include "chat_output/chat_output.h"

namespace sluice::chat_output {

struct TaggedSyntax;

class OutputParser {
 public:
  OutputParser(OutputFormat format, bool starts_in_reasoning);

  ParsedOutput push(std::string_view text);
  ParsedOutput finish();  // the rest; push() must not be called after it

 private:
  enum class Mode {
    Raw,            // everything is content, as is
    Content,        // tagged formats: content, watching for reasoning and calls
    Reasoning,      // inside <think>...
    Section,        // inside a call section (DeepSeek): only calls count
    Call,           // inside one call: its body is collected
    HarmonyStart,   // nothing seen yet: harmony header, or plain text?
    HarmonyHeader,  // collecting a message header up to <|message|>
    HarmonyBody,    // a message body
  };

  // Routes text to the output of the current mode.
  void take_text(std::string_view text, ParsedOutput& out);
  // Acts on the marker `m` that ended the text of the current mode.
  void take_marker(std::string_view m, ParsedOutput& out);
  void add_call(std::string name, std::string arguments, ParsedOutput& out);
  void run(ParsedOutput& out, bool at_end);

  // One output (content or reasoning) with optional trimming: leading
  // whitespace is dropped, trailing whitespace held until text follows.
  struct Channel {
    void add(std::string_view s, bool trim, std::string& out);
    bool started = false;
    std::string held;
  };

  const TaggedSyntax* tagged_;  // null: Plain or Harmony
  Mode mode_;
  std::string pending_;      // text not yet routed (a possible marker start)
  std::string body_;         // the current call body or harmony header
  bool thought_ = false;     // a reasoning block was seen: no other one opens
  std::string call_name_;    // harmony: the function the current message calls
  std::string channel_;      // harmony: the current message's channel
  Channel content_, reasoning_;
  size_t n_calls_ = 0;
};

}  // namespace sluice::chat_output
