// Anthropic's Messages API (POST /v1/messages) on the chat machinery.
//
// The request is translated into the OpenAI chat body parse_chat_request
// takes (so every chat check and limit applies): `system` (a string or text
// blocks) becomes the first message; content blocks become text
// (text blocks joined), assistant `tool_use` blocks become tool_calls, user
// `tool_result` blocks become "tool" messages; `tools` ({name, description,
// input_schema}) become function tools; `tool_choice` auto/any/tool/none
// becomes "auto"/"required"/the named function/"none"; `stop_sequences`
// become `stop`. `max_tokens` is required (as Anthropic requires it).
// `thinking` and `metadata` are accepted and ignored (a template that
// reasons reasons anyway); image and document blocks are a 400.
//
// The answer, split by chat_output/chat_output.h, becomes content blocks:
// "thinking" (reasoning, signature ""), "text", "tool_use" (input parsed from
// the call's arguments). stop_reason: "tool_use", "max_tokens",
// "stop_sequence" (stop_sequence set when the request had exactly one, else
// null) or "end_turn". Streamed: message_start, then per block
// content_block_start / content_block_delta (text_delta, thinking_delta,
// input_json_delta) / content_block_stop, then message_delta (stop_reason,
// usage) and message_stop, each an SSE `event: NAME` + `data: JSON`.
// A bad request is a 400 in Anthropic's error shape ({"type": "error",
// "error": {"type": "invalid_request_error", "message"}}; server.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "chat_output/chat_output_stream.h"
#include "server/engine.h"
#include "server/request.h"

namespace sluice::server {

GenerationRequest parse_messages_request(const nlohmann::json& body, const GenerationDefaults& d);

struct MessagesInfo {
  std::string id;  // "msg_N"
  std::string model;
  chat_output::OutputFormat format = chat_output::OutputFormat::Plain;
  bool starts_in_reasoning = false;
  bool forced_tool_call = false;     // tool_choice any/tool: the answer is the call's JSON
  std::string single_stop_sequence;  // the request's only stop sequence ("" when 0 or several)
};

using SseEvent = std::pair<std::string, nlohmann::json>;  // event name, data

class MessagesBuilder {
 public:
  explicit MessagesBuilder(MessagesInfo info);
  nlohmann::json whole(const GenerationResult& g) const;
  std::vector<SseEvent> stream_start(int input_tokens) const;
  std::vector<SseEvent> stream_text(const std::string& text);
  std::vector<SseEvent> stream_end(const GenerationResult& g);

 private:
  void add(const chat_output::ParsedOutput& part, std::vector<SseEvent>& events);
  void open_block(const std::string& type, const nlohmann::json& block,
                  std::vector<SseEvent>& events);
  void close_block(std::vector<SseEvent>& events);

  MessagesInfo info_;
  chat_output::OutputParser parser_;
  std::string forced_text_;
  std::string open_type_;  // the open block's type ("" when none)
  int index_ = -1;         // the last opened block's index
  int n_calls_ = 0;
};

}  // namespace sluice::server
