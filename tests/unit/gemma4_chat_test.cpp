// Gemma 4's chat template (../shared/data/chat-templates/google-gemma-4-31B-it
// .jinja) and its output format: turn markers, the thinking switch, and a tool
// call that round-trips (rendered by the template as the model writes it,
// parsed back by chat_output's Gemma4 format into the same call).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "chat_output/chat_output.h"
#include "chat_output/chat_output_stream.h"
#include "test_support.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

std::string gemma4_template() {
  std::ifstream f(test::shared_path("data/chat-templates/google-gemma-4-31B-it.jinja"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Gemma4Chat, TurnMarkersAndThinkingSwitch) {
  if (!test::shared_has("data/chat-templates/google-gemma-4-31B-it.jinja")) GTEST_SKIP() << "template absent";
  chat::ChatInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role":"system","content":"Be brief."},
                                                  {"role":"user","content":"Hi"}])");
  in.add_generation_prompt = true;
  in.bos_token = "<bos>";
  EXPECT_EQ(chat::render_chat(gemma4_template(), in),
            "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  in.extra["enable_thinking"] = true;
  const std::string thinking = chat::render_chat(gemma4_template(), in);
  EXPECT_EQ(thinking, "<bos><|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  EXPECT_FALSE(chat_output::prompt_opens_reasoning(thinking, chat_output::OutputFormat::Gemma4));
}

TEST(Gemma4Chat, ToolCallRoundTripsThroughTemplateAndParser) {
  if (!test::shared_has("data/chat-templates/google-gemma-4-31B-it.jinja")) GTEST_SKIP() << "template absent";
  chat::ChatInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([
    {"role":"user","content":"Weather in Paris?"},
    {"role":"assistant","content":"","tool_calls":[{"id":"c0","type":"function","function":{"name":"get_weather",
      "arguments":{"city":"Paris","days":3,"units":["C","F"],"opts":{"hourly":true,"note":"a, b: {c}"}}}}]}])");
  const std::string text = chat::render_chat(gemma4_template(), in);
  const std::string call =
      "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,opts:{hourly:true,note:<|\"|>a, b: {c}<|\"|>},"
      "units:[<|\"|>C<|\"|>,<|\"|>F<|\"|>]}<tool_call|>";
  const size_t at = text.find(call);
  ASSERT_NE(at, std::string::npos) << text;

  // The model's answer in that form (with reasoning first) parses back into the call.
  const std::string answer = "<|channel>thought\nNeed the tool.<channel|>Checking." + call;
  const chat_output::ParsedOutput out = chat_output::parse_output(answer, chat_output::OutputFormat::Gemma4);
  EXPECT_EQ(out.reasoning_content, "Need the tool.");
  EXPECT_EQ(out.content, "Checking.");
  ASSERT_EQ(out.tool_calls.size(), 1u);
  EXPECT_EQ(out.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(nlohmann::json::parse(out.tool_calls[0]["function"]["arguments"].get<std::string>()),
            nlohmann::json::parse(R"({"city":"Paris","days":3,"units":["C","F"],
                                      "opts":{"hourly":true,"note":"a, b: {c}"}})"));
  // Streamed token by token, the answer splits the same way.
  chat_output::OutputParser p(chat_output::OutputFormat::Gemma4, false);
  chat_output::ParsedOutput streamed;
  for (char c : answer) streamed.append(p.push(std::string(1, c)));
  streamed.append(p.finish());
  EXPECT_EQ(streamed.content, out.content);
  EXPECT_EQ(streamed.reasoning_content, out.reasoning_content);
  EXPECT_EQ(streamed.tool_calls, out.tool_calls);
  // A malformed call stays content, as text.
  const auto bad = chat_output::parse_output("<|tool_call>call:f{a:<|\"|>x}<tool_call|>",
                                             chat_output::OutputFormat::Gemma4);
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_NE(bad.content.find("call:f"), std::string::npos);
  EXPECT_EQ(chat_output::output_format_for("gemma4", ""), chat_output::OutputFormat::Gemma4);
}

}  // namespace
}  // namespace sluice
