// Qwen3-Coder / Qwen3.5 XML tool calls (OutputFormat::QwenXml): literal
// answers, and the round trip through the real Qwen3.5 template — a call the
// template renders into an assistant turn must parse back to the same call.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "chat_output/chat_output.h"
#include "test_support.h"

namespace sluice::chat_output {
namespace SLUICE_TEST_FILE {

nlohmann::json call(int i, const std::string& name, const std::string& args) {
  return {{"id", "call_" + std::to_string(i)}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

TEST(ChatOutputQwenXml, ReasoningContentAndCalls) {
  const ParsedOutput p = parse_output(
      "The user wants weather.\n</think>\n\nLet me check.\n\n<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n<parameter=note>\nline one\nline two\n"
      "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
      OutputFormat::QwenXml, true);
  EXPECT_EQ(p.reasoning_content, "The user wants weather.");
  EXPECT_EQ(p.content, "Let me check.");
  EXPECT_EQ(p.tool_calls, nlohmann::json::array({call(0, "get_weather", R"({"city":"Paris","days":2,"note":"line one\nline two"})"),
                                                  call(1, "now", "{}")}));
}

// A token may end inside a UTF-8 character: the value's bad bytes become
// U+FFFD, never a throw from the JSON writer.
TEST(ChatOutputQwenXml, ArgumentThatIsNotUtf8IsReplaced) {
  const ParsedOutput p = parse_output("<tool_call>\n<function=f>\n<parameter=a>\nx\xE2\x82\n</parameter>\n</function>\n</tool_call>",
                                      OutputFormat::QwenXml);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0]["function"]["arguments"], "{\"a\":\"x\xEF\xBF\xBD\"}");
}

TEST(ChatOutputQwenXml, MalformedCallsStayText) {
  for (const std::string body : {"<function=f>\n<parameter=a>\n1\n</function>",  // parameter never closed
                                 "<function=f>\nstray text\n</function>",         // text that is no parameter
                                 "{\"name\": \"f\", \"arguments\": {}}",           // Hermes JSON is not this format
                                 "<function=>\n</function>"}) {                  // no name
    const std::string text = "Answer <tool_call>" + body + "</tool_call>";
    const ParsedOutput p = parse_output(text, OutputFormat::QwenXml);
    EXPECT_TRUE(p.tool_calls.empty()) << body;
    EXPECT_EQ(p.content, text) << body;
  }
}

TEST(ChatOutputQwenXml, TemplatesChooseTheFormat) {
  EXPECT_EQ(output_format_for("qwen35moe", ""), OutputFormat::QwenXml);
  EXPECT_EQ(output_format_for("qwen3moe", "... <tool_call>\n<function=example_function_name> ..."), OutputFormat::QwenXml);
  for (const auto& [file, want] : {std::pair{"Qwen3.5-4B.jinja", OutputFormat::QwenXml},
                                   std::pair{"Qwen3-Coder.jinja", OutputFormat::QwenXml},
                                   std::pair{"Qwen-Qwen3-0.6B.jinja", OutputFormat::Think}}) {
    const std::string path = test::shared_path(std::string("data/chat-templates/") + file);
    std::ifstream in(path);
    if (!in) GTEST_SKIP() << "no " << path << " (../shared absent)";
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(output_format_for("qwen3moe", text.str()), want) << file;
  }
}

// The real template writes the call; the parser must read back the same call.
TEST(ChatOutputQwenXml, RoundTripThroughTheQwen35Template) {
  const std::string path = test::shared_path("data/chat-templates/Qwen3.5-4B.jinja");
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << "no " << path << " (../shared absent)";
  std::stringstream tmpl;
  tmpl << in.rdbuf();
  const nlohmann::ordered_json args = {
      {"city", "Paris"}, {"days", 2}, {"ratio", 0.5}, {"metric", true}, {"tags", {"a", "b"}}, {"opts", {{"k", 1}}}};
  chat::ChatInputs ci;
  ci.messages = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "weather?"}},
       {{"role", "assistant"},
        {"content", "Checking."},
        {"tool_calls", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", args}}}}}}}});
  const std::string rendered = chat::render_chat(tmpl.str(), ci);
  const size_t turn = rendered.rfind("<|im_start|>assistant\n");
  const size_t end = rendered.rfind("<|im_end|>");
  ASSERT_NE(turn, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string answer = rendered.substr(turn + 22, end - turn - 22);
  const ParsedOutput p = parse_output(answer, OutputFormat::QwenXml);
  EXPECT_EQ(p.content, "Checking.") << answer;
  ASSERT_EQ(p.tool_calls.size(), 1u) << answer;
  EXPECT_EQ(p.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(nlohmann::json::parse(p.tool_calls[0]["function"]["arguments"].get<std::string>()), nlohmann::json(args))
      << answer;
}

}  // namespace
}  // namespace sluice::chat_output
