// The raw answer of each supported output format split into content,
// reasoning and OpenAI tool calls, exactly.
#include <gtest/gtest.h>

#include "runtime/chat_output.h"

namespace sluice::runtime {
namespace {

nlohmann::json call(int i, const std::string& name, const std::string& args) {
  return {{"id", "call_" + std::to_string(i)}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

TEST(ChatOutput, ThinkAndHermesToolCalls) {
  const ParsedOutput p = parse_output(
      "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
      OutputFormat::Think);
  EXPECT_EQ(p.reasoning_content, "The user wants weather.");
  EXPECT_EQ(p.content, "Let me check.");
  EXPECT_EQ(p.tool_calls, nlohmann::json::array({call(0, "get_weather", R"({"city":"Paris","days":2})")}));
  // The opening tag may be in the prompt; a malformed call stays text.
  const ParsedOutput q = parse_output("reasoning only</think>Answer <tool_call>not json</tool_call>", OutputFormat::Think);
  EXPECT_EQ(q.reasoning_content, "reasoning only");
  EXPECT_EQ(q.content, "Answer <tool_call>not json</tool_call>");
  EXPECT_TRUE(q.tool_calls.empty());
}

TEST(ChatOutput, GlmArgKeyValueCalls) {
  const ParsedOutput p = parse_output(
      "<think>plan</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
      OutputFormat::Glm);
  EXPECT_EQ(p.reasoning_content, "plan");
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.tool_calls, nlohmann::json::array({call(0, "get_weather", R"({"city":"Paris","days":2})")}));
}

TEST(ChatOutput, DeepSeekToolCalls) {
  const ParsedOutput p = parse_output(
      "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"sluice\"}<｜tool▁call▁end｜>"
      "<｜tool▁call▁begin｜>open<｜tool▁sep｜>{\"id\": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      OutputFormat::DeepSeek);
  EXPECT_EQ(p.content, "Sure.");
  EXPECT_EQ(p.tool_calls,
            nlohmann::json::array({call(0, "search", R"({"q":"sluice"})"), call(1, "open", R"({"id":3})")}));
}

TEST(ChatOutput, HarmonyChannelsAndCalls) {
  const ParsedOutput p = parse_output(
      "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.",
      OutputFormat::Harmony);
  EXPECT_EQ(p.reasoning_content, "Need the weather.");
  EXPECT_EQ(p.content, "It is sunny.");
  const ParsedOutput c = parse_output(
      "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
      "json<|message|>{\"city\": \"Paris\"}<|call|>",
      OutputFormat::Harmony);
  EXPECT_EQ(c.reasoning_content, "Call it.");
  EXPECT_EQ(c.content, "");
  EXPECT_EQ(c.tool_calls, nlohmann::json::array({call(0, "get_weather", R"({"city":"Paris"})")}));
  EXPECT_EQ(parse_output("plain text", OutputFormat::Harmony).content, "plain text");
}

TEST(ChatOutput, FormatFollowsTheArchitectureAndTemplate) {
  EXPECT_EQ(output_format_for("gpt-oss", ""), OutputFormat::Harmony);
  EXPECT_EQ(output_format_for("glm4moe", ""), OutputFormat::Glm);
  EXPECT_EQ(output_format_for("deepseek2", ""), OutputFormat::DeepSeek);
  EXPECT_EQ(output_format_for("qwen3moe", "... <tool_call> ..."), OutputFormat::Think);
  EXPECT_EQ(output_format_for("llama", "{{ messages }}"), OutputFormat::Plain);
}

}  // namespace
}  // namespace sluice::runtime
