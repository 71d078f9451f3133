// The incremental output parser (chat_output/chat_output_stream.h): every
// format's sample answers fed one character at a time and in random chunks
// split exactly as the whole answer does, and text is held back only while
// it could still start a marker.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat_output/chat_output.h"
#include "chat_output/chat_output_stream.h"

namespace sluice::chat_output {
namespace SLUICE_TEST_FILE {

struct Sample {
  OutputFormat format;
  bool starts_in_reasoning;
  std::string text;
};

// Realistic answers and the edge cases of each format: markers at the ends,
// broken calls, unclosed parts, near-misses of markers, multi-byte text.
std::vector<Sample> samples() {
  const std::string hermes_call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  return {
      {OutputFormat::Think, false,
       "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n" + hermes_call + "\n" + hermes_call},
      {OutputFormat::Think, true, "reasoning only</think>Answer <tool_call>not json</tool_call> and <tool_ca"},
      {OutputFormat::Think, false, "  Plain answer < with <thin and </think> and a <tool_call without end  \n"},
      {OutputFormat::Think, false, "été <think> déjà vu </think>  ünïcödé\n\n" + hermes_call + " trailing"},
      {OutputFormat::Think, false, "<think>cut off mid-thought <tool_call>"},
      {OutputFormat::Think, false, hermes_call},
      {OutputFormat::Think, true, "\n<think>\nopened twice <think> then</think>answer"},
      {OutputFormat::Think, false, "<tool_call>{\"name\": \"x\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call><tool_call>{\"na"},
      {OutputFormat::Glm, false,
       "\n<think>plan</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
       "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>"},
      {OutputFormat::Glm, true, "plan</think>Text <tool_call>\n<arg_key>x</arg_key></tool_call> end"},
      {OutputFormat::DeepSeek, false,
       "<think>hmm</think>Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"sluice\"}"
       "<｜tool▁call▁end｜><｜tool▁call▁begin｜>open<｜tool▁sep｜>{\"id\": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜> after"},
      {OutputFormat::DeepSeek, true, "deep thought</think>Answer <｜tool▁call and <｜tool▁calls▁begin｜>junk<｜tool▁call▁begin｜>f"},
      {OutputFormat::Harmony, false,
       "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny."},
      {OutputFormat::Harmony, false,
       "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
       "json<|message|>{\"city\": \"Paris\"}<|call|>"},
      {OutputFormat::Harmony, false, "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}"},
      {OutputFormat::Harmony, false, "plain text <|end|> with markers"},
      {OutputFormat::Harmony, false, " to be or not"},
      {OutputFormat::Harmony, false, "<|chan"},
      {OutputFormat::Plain, false, " <think>x</think> <tool_call>{}</tool_call> "},
  };
}

ParsedOutput feed(const Sample& s, const std::vector<size_t>& cuts) {
  OutputParser p(s.format, s.starts_in_reasoning);
  ParsedOutput out;
  size_t at = 0;
  for (size_t cut : cuts) {
    out.append(p.push(std::string_view(s.text).substr(at, cut - at)));
    at = cut;
  }
  out.append(p.push(std::string_view(s.text).substr(at)));
  out.append(p.finish());
  return out;
}

void expect_same(const ParsedOutput& got, const ParsedOutput& want, const std::string& what) {
  EXPECT_EQ(got.content, want.content) << what;
  EXPECT_EQ(got.reasoning_content, want.reasoning_content) << what;
  EXPECT_EQ(got.tool_calls, want.tool_calls) << what;
}

TEST(ChatOutputStream, AnyChunkingSplitsAsTheWholeAnswer) {
  std::mt19937 rng(1234);
  for (const Sample& s : samples()) {
    const ParsedOutput whole = parse_output(s.text, s.format, s.starts_in_reasoning);
    // Every sample exercises something: a non-empty split.
    EXPECT_FALSE(whole.empty()) << s.text;
    std::vector<size_t> every;
    for (size_t i = 1; i < s.text.size(); ++i) every.push_back(i);
    expect_same(feed(s, every), whole, "one byte at a time: " + s.text);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < s.text.size(); ++i)
        if (rng() % 5 == 0) cuts.push_back(i);
      expect_same(feed(s, cuts), whole, "random chunks (trial " + std::to_string(trial) + "): " + s.text);
    }
  }
}

TEST(ChatOutputStream, HoldsBackOnlyPossibleMarkersAndTrailingSpace) {
  OutputParser p(OutputFormat::Think, false);
  EXPECT_EQ(p.push("Hello wor").content, "Hello wor");
  EXPECT_EQ(p.push("ld <thi").content, "ld");  // held: a space that may end the content, and a possible <think>
  EXPECT_EQ(p.push("s is no tag").content, " <this is no tag");
  ParsedOutput r = p.push(" <think>deep");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.reasoning_content, "deep");
  r = p.push(" thought</think>\n\nDone <tool_call>{\"name\": \"f\"");
  EXPECT_EQ(r.reasoning_content, " thought");
  EXPECT_EQ(r.content, " \n\nDone");  // the space held before <think> is content's; " " may end it
  EXPECT_TRUE(r.tool_calls.empty());  // the call is not complete yet
  r = p.push(", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(r.tool_calls, nlohmann::json::array({{{"id", "call_0"}, {"type", "function"},
                                                   {"function", {{"name", "f"}, {"arguments", "{}"}}}}}));
  EXPECT_TRUE(p.finish().empty());

  // Harmony streams a message body as it comes.
  OutputParser h(OutputFormat::Harmony, false);
  EXPECT_TRUE(h.push("<|channel|>analysis<|mess").empty());
  EXPECT_EQ(h.push("age|>Thinking <|e").reasoning_content, "Thinking ");
  EXPECT_EQ(h.push("nd|><|start|>assistant<|channel|>final<|message|>Hi").content, "Hi");
}

}  // namespace
}  // namespace sluice::chat_output
