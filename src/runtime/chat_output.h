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
//   Harmony   gpt-oss: <|channel|>analysis<|message|>...<|end|> reasoning,
//             <|channel|>final<|message|>... content, and
//             to=functions.NAME<|channel|>commentary json<|message|>{args}<|call|>
// Text that does not parse as a tool call stays in content (nothing is lost).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace sluice::runtime {

enum class OutputFormat { Plain, Think, Glm, DeepSeek, Harmony };

// The format for a GGUF general.architecture (and chat template text, which
// decides between Hermes and plain for the llama/qwen families).
OutputFormat output_format_for(const std::string& arch, const std::string& chat_template);

struct ParsedOutput {
  std::string content;
  std::string reasoning_content;
  nlohmann::json tool_calls = nlohmann::json::array();
};

ParsedOutput parse_output(const std::string& text, OutputFormat format);

}  // namespace sluice::runtime
