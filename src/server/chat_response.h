// The OpenAI shapes of a chat answer split by runtime/chat_output.h: the
// message of a non-streaming response, and the `delta` objects of a streaming
// one (reasoning_content and content as they come, each tool call once
// complete, with its index), so that what a client accumulates from the
// stream equals the non-streaming message.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/chat_output.h"
#include "runtime/chat_output_stream.h"

namespace sluice::server {

// {"role": "assistant", "content", ["reasoning_content"], ["tool_calls"]}.
nlohmann::json chat_message(const runtime::ParsedOutput& answer);

// "tool_calls" when the answer called a tool, else the generation's reason.
std::string chat_finish_reason(const std::string& generation_reason, bool called_tools);

class ChatDeltaStream {
 public:
  ChatDeltaStream(runtime::OutputFormat format, bool starts_in_reasoning) : parser_(format, starts_in_reasoning) {}

  // The deltas to send for the next piece of generated text (possibly none).
  std::vector<nlohmann::json> push(const std::string& text) { return deltas(parser_.push(text)); }
  // The deltas for what the parser still held, at the end of generation.
  std::vector<nlohmann::json> finish() { return deltas(parser_.finish()); }
  bool called_tools() const { return n_calls_ > 0; }

 private:
  std::vector<nlohmann::json> deltas(const runtime::ParsedOutput& part);

  runtime::OutputParser parser_;
  size_t n_calls_ = 0;
};

}  // namespace sluice::server
