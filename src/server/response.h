// The OpenAI response bodies of one generation: the whole response, or the
// events of a streamed one (each a JSON payload for one SSE `data:` line).
//
// Chat answers are split by chat_output/chat_output.h alike in both: the whole
// response's message has content, reasoning_content and tool_calls; the
// stream sends delta.reasoning_content and delta.content chunks as they are
// decided and each delta.tool_calls entry (with its index) once the call is
// complete, so what a client accumulates from the stream equals the message.
// finish_reason is "tool_calls" when the answer called a tool. A generation
// notice (GenerationResult::notice) is a top-level "notice" string in the
// whole response and in the last streamed chunk.
//
// No HTTP here: server.cpp writes what these return.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_output/chat_output.h"
#include "chat_output/chat_output_stream.h"
#include "server/engine.h"

namespace sluice::server {

struct ResponseInfo {
  std::string id;       // "chatcmpl-N" / "cmpl-N"
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool chat = false;    // /v1/chat/completions (else /v1/completions)
  chat_output::OutputFormat format = chat_output::OutputFormat::Plain;  // chat: how the answer is split
  bool starts_in_reasoning = false;  // chat: the prompt left a reasoning block open
};

class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseInfo info);

  // The non-streaming response body.
  nlohmann::json whole(const GenerationResult& g) const;

  // Streaming, in this order: the events before any text, those for each
  // emitted piece of text (possibly none), and the last ones (the rest of
  // the answer, then the chunk with finish_reason and usage; [DONE] is not
  // included).
  std::vector<nlohmann::json> stream_start() const;
  std::vector<nlohmann::json> stream_text(const std::string& text);
  std::vector<nlohmann::json> stream_end(const GenerationResult& g);

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  void add_deltas(const chat_output::ParsedOutput& part, std::vector<nlohmann::json>& events);

  ResponseInfo info_;
  chat_output::OutputParser parser_;
  size_t n_calls_ = 0;
};

}  // namespace sluice::server
