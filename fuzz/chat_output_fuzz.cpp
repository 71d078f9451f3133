// libFuzzer target for the chat-output splitter (chat_output/chat_output*): the
// first byte picks the OutputFormat (and whether the answer starts inside
// reasoning), the second seeds the chunking, the rest is the model's answer.
//
// Invariants checked (chat_output_stream.h's contract): the answer fed whole
// (parse_output), fed byte by byte, and fed in pseudo-random chunks gives the
// same content, reasoning and tool calls; every tool call is
// {id "call_i", type "function", function {name: string, arguments: string}}
// numbered in order; nothing throws. The whole result also serialises as
// JSON (what serve sends), with invalid UTF-8 replaced.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat_output/chat_output.h"
#include "chat_output/chat_output_stream.h"

namespace {

using sluice::chat_output::OutputFormat;
using sluice::chat_output::OutputParser;
using sluice::chat_output::ParsedOutput;

// OutputFormat has seven values: Plain, Think, QwenXml, Glm, DeepSeek, Harmony, Gemma4.
constexpr int kFormats = 7;

bool same(const ParsedOutput& a, const ParsedOutput& b) {
  return a.content == b.content && a.reasoning_content == b.reasoning_content &&
         a.tool_calls == b.tool_calls;
}

void check_calls(const ParsedOutput& p) {
  if (!p.tool_calls.is_array()) std::abort();
  for (size_t i = 0; i < p.tool_calls.size(); ++i) {
    const nlohmann::json& c = p.tool_calls[i];
    if (c.value("id", "") != "call_" + std::to_string(i) || c.value("type", "") != "function")
      std::abort();
    const auto f = c.find("function");
    if (f == c.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string() ||
        !f->contains("arguments") || !(*f)["arguments"].is_string())
      std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const OutputFormat format = static_cast<OutputFormat>(data[0] % kFormats);
  const bool in_reasoning = (data[0] / kFormats) & 1;
  uint32_t state = data[1] * 2654435761u + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const ParsedOutput whole = sluice::chat_output::parse_output(text, format, in_reasoning);
  check_calls(whole);

  OutputParser bytes(format, in_reasoning);
  ParsedOutput by_byte;
  for (size_t k = 0; k < text.size(); ++k) by_byte.append(bytes.push(text.substr(k, 1)));
  by_byte.append(bytes.finish());
  if (!same(whole, by_byte)) std::abort();

  OutputParser chunks(format, in_reasoning);
  ParsedOutput by_chunk;
  for (size_t k = 0; k < text.size();) {
    state = state * 1664525u + 1013904223u;
    // Mostly short pieces (a token is a few bytes), sometimes an empty one or a long one.
    const size_t n = (state >> 28) == 0 ? 0 : (state >> 28) == 1 ? 64 : 1 + ((state >> 16) & 7);
    by_chunk.append(chunks.push(text.substr(k, n)));
    k += n;
  }
  by_chunk.append(chunks.finish());
  if (!same(whole, by_chunk)) std::abort();

  // What serve does with the result: a JSON message, invalid UTF-8 replaced.
  nlohmann::json msg = {{"content", whole.content},
                        {"reasoning_content", whole.reasoning_content},
                        {"tool_calls", whole.tool_calls}};
  (void)msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
