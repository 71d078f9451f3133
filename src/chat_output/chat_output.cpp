#include "chat_output/chat_output.h"

#include "chat_output/chat_output_stream.h"
#include "chat_output/chat_syntax.h"

namespace sluice::chat_output {

OutputFormat output_format_for(const std::string& arch, const std::string& chat_template) {
  if (arch == "gpt-oss") return OutputFormat::Harmony;
  if (arch == "glm4moe") return OutputFormat::Glm;
  if (arch == "deepseek2") return OutputFormat::DeepSeek;
  if (arch == "gemma4" || chat_template.find("<|tool_call>call:") != std::string::npos) return OutputFormat::Gemma4;
  if (chat_template.find("<function=") != std::string::npos || (arch == "qwen35moe" && chat_template.empty()))
    return OutputFormat::QwenXml;
  if (chat_template.find("<think>") != std::string::npos || chat_template.find("<tool_call>") != std::string::npos)
    return OutputFormat::Think;
  return OutputFormat::Plain;
}

bool prompt_opens_reasoning(std::string_view prompt, OutputFormat format) {
  const TaggedSyntax* syntax = tagged_syntax(format);
  if (!syntax || syntax->think_open.empty()) return false;
  const size_t end = prompt.find_last_not_of(" \t\r\n");
  return end != std::string_view::npos && prompt.substr(0, end + 1).ends_with(syntax->think_open);
}

ParsedOutput parse_output(std::string_view text, OutputFormat format, bool starts_in_reasoning) {
  OutputParser parser(format, starts_in_reasoning);
  ParsedOutput out = parser.push(text);
  out.append(parser.finish());
  return out;
}

}  // namespace sluice::chat_output
