// The raw answer of each supported output format split into content,
// reasoning and OpenAI tool calls, exactly.
#include <gtest/gtest.h>

#include "chat_output/chat_output.h"

namespace sluice::chat_output {
namespace SLUICE_TEST_FILE {

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
  const ParsedOutput q =
      parse_output("reasoning only</think>Answer <tool_call>not json</tool_call>", OutputFormat::Think, true);
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

// Found by chat_output_fuzz: a GLM argument value is raw model bytes; one
// that is not UTF-8 made nlohmann's dump() throw type_error 316 (serve then
// failed the request). The bad bytes become U+FFFD, the call is kept.
TEST(ChatOutput, GlmArgumentThatIsNotUtf8IsReplacedNotThrown) {
  const ParsedOutput p = parse_output(
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par\x9fis</arg_value>\n</"
      "tool_call>",
      OutputFormat::Glm);
  EXPECT_EQ(p.tool_calls,
            nlohmann::json::array({call(0, "get_weather", "{\"city\":\"Par\xEF\xBF\xBDis\"}")}));
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

TEST(ChatOutput, UnfinishedPartsAndStrayMarkers) {
  // An unclosed reasoning block runs to the end (a cut-off answer); an
  // unclosed call is text; only the first reasoning block is reasoning.
  EXPECT_EQ(parse_output("<think>still thinking", OutputFormat::Think).reasoning_content, "still thinking");
  const ParsedOutput open_call = parse_output("Hi <tool_call>{\"name\"", OutputFormat::Think);
  EXPECT_EQ(open_call.content, "Hi <tool_call>{\"name\"");
  EXPECT_TRUE(open_call.tool_calls.empty());
  const ParsedOutput twice = parse_output("a <think>b</think> c <think>d</think>", OutputFormat::Think);
  EXPECT_EQ(twice.reasoning_content, "b");
  EXPECT_EQ(twice.content, "a  c <think>d</think>");
  // A block the prompt opened and the model opens again: the second tag is
  // dropped, one after reasoning text is text.
  const ParsedOutput again = parse_output("\n<think>\nhm <think> ok</think>yes", OutputFormat::Think, true);
  EXPECT_EQ(again.reasoning_content, "hm <think> ok");
  EXPECT_EQ(again.content, "yes");
  // Without a prompt-opened block, a closing tag alone is content.
  EXPECT_EQ(parse_output("x</think>y", OutputFormat::Think).content, "x</think>y");
  // DeepSeek's section holds only calls: an unfinished one is dropped.
  EXPECT_EQ(parse_output("Ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{", OutputFormat::DeepSeek).content,
            "Ok");
  // Harmony: a call cut at the end (its <|call|> is the end of generation) is complete.
  const ParsedOutput h = parse_output("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}",
                                      OutputFormat::Harmony);
  EXPECT_EQ(h.tool_calls, nlohmann::json::array({call(0, "f", R"({"a":1})")}));
  EXPECT_EQ(h.content, "");
  // Plain keeps everything, whitespace included.
  EXPECT_EQ(parse_output(" <think>x</think> ", OutputFormat::Plain).content, " <think>x</think> ");
}

TEST(ChatOutput, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", OutputFormat::Think));
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>", OutputFormat::DeepSeek));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", OutputFormat::Think));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n", OutputFormat::Think));
  EXPECT_FALSE(prompt_opens_reasoning("<think>", OutputFormat::Harmony));
  EXPECT_FALSE(prompt_opens_reasoning("<think>", OutputFormat::Plain));
}

TEST(ChatOutput, FormatFollowsTheArchitectureAndTemplate) {
  EXPECT_EQ(output_format_for("gpt-oss", ""), OutputFormat::Harmony);
  EXPECT_EQ(output_format_for("glm4moe", ""), OutputFormat::Glm);
  EXPECT_EQ(output_format_for("deepseek2", ""), OutputFormat::DeepSeek);
  EXPECT_EQ(output_format_for("qwen3moe", "... <tool_call> ..."), OutputFormat::Think);
  EXPECT_EQ(output_format_for("llama", "{{ messages }}"), OutputFormat::Plain);
}

}  // namespace
}  // namespace sluice::chat_output
