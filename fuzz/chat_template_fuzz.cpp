// libFuzzer target for the chat-template engine (src/chat): the input is a
// template, optionally followed by a NUL byte and a JSON context
// {"messages": [...], "tools": [...], "add_generation_prompt": bool, ...}
// (other keys become extra variables); without one (or when it is not a JSON
// object) a built-in conversation with a system prompt, a tool call, a tool
// answer and two tools is used, the shape real templates expect. Seeds: the
// real templates in ../shared/data/chat-templates (scripts/fuzz.sh copies
// them into the run's corpus), dictionary fuzz/jinja.dict.
//
// Contract checked: render_chat returns or throws sluice::Error, never
// anything else, never a crash, a hang or unbounded memory. The render runs
// under tight RenderLimits so that a legitimate but expensive template (a
// loop over range(10**6)) ends in the limit's error quickly instead of
// looking like a timeout to libFuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "util/error.h"

namespace {

using nlohmann::ordered_json;

const ordered_json& default_context() {
  static const ordered_json ctx = ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris? \u00e9\u4e2d"},
      {"role": "assistant", "content": "", "reasoning_content": "Look it up.",
       "tool_calls": [{"id": "call_0", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
      {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "{\"t\": 21.5}"},
      {"role": "assistant", "content": "<think>ok</think>21.5 C"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [
      {"type": "function", "function": {"name": "get_weather", "description": "Forecast",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                       "days": {"type": "integer", "enum": [1, 2]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}
    ],
    "add_generation_prompt": true,
    "enable_thinking": true
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string tpl = input.substr(0, nul);
  ordered_json ctx = default_context();
  if (nul != std::string::npos) {
    // Depth-capped like serve's bodies: the engine sees at most that.
    int max_depth = 0;
    ordered_json j = ordered_json::parse(
        input.substr(nul + 1),
        [&](int depth, ordered_json::parse_event_t, ordered_json&) {
          if (depth > max_depth) max_depth = depth;
          return true;
        },
        false);
    if (j.is_object() && max_depth <= 64) ctx = std::move(j);
  }
  sluice::chat::ChatInputs in;
  if (auto it = ctx.find("messages"); it != ctx.end()) in.messages = *it;
  if (auto it = ctx.find("tools"); it != ctx.end()) in.tools = *it;
  if (auto it = ctx.find("add_generation_prompt"); it != ctx.end() && it->is_boolean())
    in.add_generation_prompt = *it;
  for (const auto& [k, v] : ctx.items())
    if (k != "messages" && k != "tools" && k != "add_generation_prompt") in.extra[k] = v;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.now.tm_year = 126;
  in.now.tm_mday = 4;
  sluice::chat::RenderLimits limits;
  limits.max_output_bytes = size_t{1} << 20;
  limits.max_steps = 50'000;
  try {
    const std::string out = sluice::chat::render_chat(tpl, in, limits);
    if (out.size() > limits.max_output_bytes) std::abort();  // the bound held
  } catch (const sluice::Error&) {
  }
  return 0;
}
