// tool_choice "required" and {"type": "function", "function": {"name"}}:
// the answer is forced to be one call, enforced with the json_schema
// machinery (grammar/json_schema_prefix.h).
//
// How: the prompt ends with the output format's call opener (Hermes/Think:
// "<tool_call>\n"; the other formats: nothing), and the answer is
// constrained to the JSON document {"name": NAME, "arguments": ARGS} where
// NAME is one of the allowed tools and ARGS is valid for that tool's
// `parameters` schema (anyOf over the tools). The response then reports that
// document as the one tool call, whatever the model's own call syntax.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat_output/chat_output.h"
#include "grammar/json_schema.h"

namespace sluice::server {

// The schema of a forced call among `tools` (the request's array), or of
// the tool named `only` when it is not empty. Throws RequestError naming
// 'tool_choice' (no tools, an unknown name) or the tool's 'parameters' (a
// schema sluice cannot enforce).
std::shared_ptr<const grammar::JsonSchema> forced_call_schema(const nlohmann::json& tools,
                                                              const std::string& only);

// The text that opens a call in `format`, appended to the rendered prompt.
std::string forced_call_opener(chat_output::OutputFormat format);

// A forced answer as OpenAI tool_calls (one call, id "call_0"); an empty
// array when the answer is not a whole call (cut by max_tokens).
nlohmann::json forced_call_tool_calls(const std::string& text);

}  // namespace sluice::server
