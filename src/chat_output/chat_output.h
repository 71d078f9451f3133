// Splitting a model's raw answer into what an OpenAI-style client expects:
// `content`, `reasoning_content` and `tool_calls` ([{id, type: "function",
// function: {name, arguments (a JSON string)}}]), for the output formats of
// the architectures sluice runs:
//   Think     <think>...</think> reasoning, then content; tool calls in
//             Hermes style <tool_call>{"name":..., "arguments":{...}}</tool_call>
//             (Qwen3, DeepSeek-R1 distills, most <think> models)
//   Glm       <think>...</think>; <tool_call>NAME\n<arg_key>K</arg_key>\n
//             <arg_value>V</arg_value>...</tool_call> (GLM-4.5/4.6/4.7)
//   DeepSeek  <think>...</think>; <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME
//             <｜tool▁sep｜>{args}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (V3.1+)
//   Gemma4    <|channel>thought\n...<channel|> reasoning; calls
//             <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|> (gemma4_call.h)
//   Harmony   gpt-oss: <|channel|>analysis<|message|>...<|end|> reasoning,
//             <|channel|>final<|message|>... content, and
//             to=functions.NAME<|channel|>commentary json<|message|>{args}<|call|>
// The markers and call readers are defined once (chat_syntax.h); the parser
// is incremental (chat_output_stream.h) and parse_output is its one-shot use,
// so a streamed answer splits exactly as the whole one does.
//
// Meaning, for the tagged formats (Think, Glm, DeepSeek): the first
// <think>...</think> block is reasoning (an unclosed one runs to the end; an
// answer whose prompt left <think> open starts inside it, and a <think> the
// model writes again before any reasoning is dropped); a well-formed tool
// call becomes a tool call; everything else is content. A Hermes-style call
// that does not parse stays in content as text (nothing is lost); DeepSeek's
// call section holds only calls. Content and reasoning are trimmed of
// surrounding whitespace. Harmony: each message goes to reasoning (analysis
// channel), a tool call (a recipient to=functions.NAME) or content (other
// channels), untrimmed; an answer that does not start like a harmony header
// is all content. Plain: everything is content, as generated.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sluice::chat_output {

// Think: <think> reasoning and Hermes JSON calls in <tool_call>; QwenXml: the
// same reasoning tags, calls as <function=NAME><parameter=KEY>VALUE</parameter>
// (Qwen3-Coder, Qwen3.5/3.6).
enum class OutputFormat { Plain, Think, QwenXml, Glm, DeepSeek, Harmony, Gemma4 };

// The format for a GGUF general.architecture (and chat template text, which
// decides between XML calls, Hermes and plain for the llama/qwen families;
// qwen35moe without a template: its official template's QwenXml).
OutputFormat output_format_for(const std::string& arch, const std::string& chat_template);

// Whether a rendered chat prompt leaves a reasoning block open, so the answer
// starts inside reasoning: the prompt ends with the opening tag and
// whitespace (QwQ, DeepSeek-R1 distills, DeepSeek-V3.1 thinking, ...).
bool prompt_opens_reasoning(std::string_view prompt, OutputFormat format);

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  nlohmann::json tool_calls = nlohmann::json::array();  // call i has id "call_i"

  bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
  // Appends a later part of the same answer (a streamed delta).
  void append(const ParsedOutput& more);
};

ParsedOutput parse_output(std::string_view text, OutputFormat format, bool starts_in_reasoning = false);

}  // namespace sluice::chat_output
