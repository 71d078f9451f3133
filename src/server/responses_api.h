// OpenAI's Responses API (POST /v1/responses) on the chat machinery.
//
// Request: `input` (a string, or items: messages {role, content: string or
// [{type: input_text|output_text, text}]}, function_call {call_id, name,
// arguments}, function_call_output {call_id, output}), `instructions` (a
// system message for this response only), `max_output_tokens`,
// temperature, top_p, stream, `tools` (function tools: {type: "function",
// name, description, parameters}), tool_choice (auto/none/required/
// {type: "function", name}), `text.format` (text, json_object, json_schema
// {schema}: enforced as response_format), `previous_response_id`. It is
// translated into the chat body parse_chat_request takes.
//
// previous_response_id: each response's conversation (its input messages
// and its answer, not its instructions) is kept in memory, at most
// ResponseStore::kCapacity of them; the least recently used is dropped
// first; an unknown or dropped id is a 400. Nothing is kept on disk.
//
// Output items: "reasoning" (content [{type: reasoning_text}]), "message"
// (content [{type: output_text, text, annotations: []}]), "function_call"
// (call_id, name, arguments). status "completed", or "incomplete" with
// incomplete_details.reason "max_output_tokens". Streamed: response.created,
// response.in_progress, then per item response.output_item.added, for text
// response.content_part.added / response.output_text.delta ... /
// response.output_text.done / response.content_part.done (reasoning:
// response.reasoning_text.delta / .done), for calls
// response.function_call_arguments.delta / .done, response.output_item.done,
// and response.completed (or response.incomplete) with the whole response;
// each `event: TYPE` + `data: JSON` with a sequence_number.
#pragma once

#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat_output/chat_output_stream.h"
#include "server/anthropic.h"  // SseEvent
#include "server/engine.h"
#include "server/request.h"

namespace sluice::server {

// The conversations of earlier responses, by id, LRU-bounded. Thread-safe.
class ResponseStore {
 public:
  static constexpr size_t kCapacity = 256;
  void put(const std::string& id, nlohmann::json messages);
  // The messages, or null when the id is unknown (never stored, or dropped).
  nlohmann::json get(const std::string& id);

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, nlohmann::json>> lru_;  // most recent first
  std::unordered_map<std::string, std::list<std::pair<std::string, nlohmann::json>>::iterator>
      index_;
};

struct ParsedResponsesRequest {
  GenerationRequest gen;
  nlohmann::json conversation;  // the messages without instructions (stored with the answer)
};

ParsedResponsesRequest parse_responses_request(const nlohmann::json& body,
                                               const GenerationDefaults& d, ResponseStore& store);

struct ResponsesInfo {
  std::string id;  // "resp_N"
  int64_t created = 0;
  std::string model;
  chat_output::OutputFormat format = chat_output::OutputFormat::Plain;
  bool starts_in_reasoning = false;
  bool forced_tool_call = false;
  nlohmann::json previous_response_id;  // null or the string
};

class ResponsesBuilder {
 public:
  explicit ResponsesBuilder(ResponsesInfo info);
  nlohmann::json whole(const GenerationResult& g) const;
  // The answer as one assistant chat message (for ResponseStore).
  nlohmann::json answer_message(const GenerationResult& g) const;
  std::vector<SseEvent> stream_start();
  std::vector<SseEvent> stream_text(const std::string& text);
  std::vector<SseEvent> stream_end(const GenerationResult& g);

 private:
  nlohmann::json envelope(const std::string& status) const;
  chat_output::ParsedOutput split(const std::string& text) const;
  void event(std::vector<SseEvent>& out, const std::string& type, nlohmann::json fields);
  void add(const chat_output::ParsedOutput& part, std::vector<SseEvent>& out);
  void close_item(std::vector<SseEvent>& out);

  ResponsesInfo info_;
  chat_output::OutputParser parser_;
  std::string forced_text_;
  int seq_ = 0;
  int index_ = -1;                                  // the last opened output item
  std::string open_kind_;                           // "reasoning", "message" or "" (none open)
  std::string open_text_;                           // the open item's text so far
  nlohmann::json items_ = nlohmann::json::array();  // closed items
  int n_calls_ = 0;
};

}  // namespace sluice::server
