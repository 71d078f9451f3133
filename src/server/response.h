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
#include <span>
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
  // The request asked for logprobs: choices carry them (logprobs_json.h),
  // token texts from `tok` (which must then be set and outlive the builder).
  bool logprobs = false;
  // A forced tool call (forced_tool.h): the whole answer is the call's JSON;
  // it is reported as tool_calls (streamed: one delta at the end), no content.
  bool forced_tool_call = false;
  const tokenizer::Tokenizer* tok = nullptr;
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
  // `lps`: the log-probabilities of the tokens since the last call; they ride
  // on the next event this builder emits (a chat parser may hold text back).
  std::vector<nlohmann::json> stream_text(const std::string& text, std::span<const runtime::TokenLogprob> lps = {});
  std::vector<nlohmann::json> stream_end(const GenerationResult& g);
  // Log-probabilities of tokens that brought no text before the end (held
  // back, then cut by a stop string): they ride on stream_end's events.
  void add_logprobs(std::span<const runtime::TokenLogprob> lps) {
    pending_lps_.insert(pending_lps_.end(), lps.begin(), lps.end());
  }

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  void add_deltas(const chat_output::ParsedOutput& part, std::vector<nlohmann::json>& events);
  nlohmann::json logprobs_json(std::span<const runtime::TokenLogprob> lps, size_t first_offset) const;
  // Puts the pending log-probabilities on events[0] (if any) and clears them.
  void attach_logprobs(std::vector<nlohmann::json>& events);

  ResponseInfo info_;
  chat_output::OutputParser parser_;
  size_t n_calls_ = 0;
  std::vector<runtime::TokenLogprob> pending_lps_;  // streamed: not yet sent
  size_t lp_offset_ = 0;
  std::string forced_text_;  // a forced call's answer so far                            // completions: text_offset of the next token
};

}  // namespace sluice::server
