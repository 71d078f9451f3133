// The OpenAI / llama-server request bodies the server accepts, parsed and
// validated into one typed GenerationRequest.
//
// Contract: parse_*() either returns a request whose every field is in range
// or throws RequestError with a message naming the offending field (the
// server answers it as a 400 invalid_request_error). Nothing here touches the
// model: the prompt stays text (or ids, or chat messages) until the engine
// tokenizes it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "runtime/sampler.h"
#include "server/limits.h"

namespace sluice::server {

// A client mistake: the body, a field's type or a field's range.
class RequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws RequestError(msg): the one way the request parsers refuse a body.
[[noreturn]] inline void bad_request(const std::string& msg) { throw RequestError(msg); }

struct GenerationDefaults {
  runtime::SamplerConfig sampler;  // temperature, top_k, top_p, min_p, seed, penalties
  bool random_seed = false;        // no seed given (-s -1): a random one per request
  int max_tokens = 128;
};

struct GenerationRequest {
  // Exactly one of these is the prompt: text, token ids, or chat messages.
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;  // ids not yet range-checked against the vocab
  nlohmann::json messages;  // chat: the messages array (null otherwise)
  nlohmann::json tools;     // chat: the tools array (null when absent, or tool_choice "none")
  int max_tokens = 128;     // -1: until the context is full
  // The field max_tokens came from ("max_tokens", "n_predict", ...), for the
  // engine's check against the context; "" when it is the server's default.
  std::string max_tokens_field;
  runtime::SamplerConfig sampler;
  bool random_seed = false;  // seed -1: draw one per request
  std::vector<std::string> stop;  // stop strings (each non-empty)
  bool stream = false;
  // `n`: choices, 1..kMaxChoices (the server also bounds it by its slots);
  // they share the prompt's evaluation (Scheduler).
  int n = 1;
  // response_format {"type": "json_object"}: the output is one JSON object
  // (also json_schema without a schema).
  bool json_object = false;
  // response_format {"type": "json_schema", "json_schema": {"schema": ...}}:
  // the output is one JSON document the compiled schema accepts (enforced
  // token by token; grammar/json_schema_prefix.h). Takes precedence over json_object.
  std::shared_ptr<const grammar::JsonSchema> json_schema;
  // tool_choice "required" or a named function (server/forced_tool.h): the
  // answer is one call, json_schema holds its schema, and assistant_prefix
  // (set by the server: the output format's call opener) ends the prompt.
  bool force_tool_call = false;
  std::string assistant_prefix;
  // Log-probabilities of the sampled tokens with this many top alternatives
  // (0..runtime::kMaxTopLogprobs); -1: not asked for. Chat: `logprobs: true`
  // and `top_logprobs`; completions: `logprobs: N` (or llama-server's `n_probs`).
  int logprobs = -1;
};

// A request body as JSON. Throws RequestError when it is not JSON, or nests
// deeper than kMaxJsonDepth (refused while parsing: a body nested 100k deep
// costs nothing and never reaches recursive code).
nlohmann::json parse_json_body(std::string_view text);

// POST /v1/completions: prompt (string, [string], or [int...]) plus the
// common fields.
GenerationRequest parse_completion_request(const nlohmann::json& body, const GenerationDefaults& d);
// POST /v1/chat/completions: messages (non-empty array of objects with a
// string role, at most kMaxMessages) plus the common fields; tools if present
// must be an array of at most kMaxTools, each at most kMaxToolJsonBytes.
// tool_choice: "auto" (default), "none" (the tools are dropped before the
// template sees them; the answer is still split for calls as with "auto"),
// "required" or {"type": "function", "function": {"name"}} (a forced call,
// force_tool_call; not combinable with response_format), anything else is a
// 400 naming 'tool_choice'.
GenerationRequest parse_chat_request(const nlohmann::json& body, const GenerationDefaults& d);

}  // namespace sluice::server
