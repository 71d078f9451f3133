// Renders a model's chat template over a conversation, with the variables
// and helpers HF transformers provides (apply_chat_template): messages,
// tools, add_generation_prompt, bos/eos tokens, raise_exception,
// strftime_now, and any extra variables (enable_thinking, ...).
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/template.h"

namespace sluice::chat {

struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // role/content/tool_calls/...
  nlohmann::ordered_json tools;  // array of tool schemas, or null (then `tools` is None)
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more template variables
  // The clock strftime_now reads: fixed by the caller so output is reproducible.
  std::tm now{};
};

// Throws sluice::Error "chat template: ..." on a syntax or runtime error; a
// template's raise_exception(msg) gives "chat template: raise_exception: msg".
// `limits` bounds the render (template.h); a template past one fails with
// that error, never hangs or runs out of memory or stack.
std::string render_chat(const std::string& template_text, const ChatInputs& in,
                        const RenderLimits& limits = {});

}  // namespace sluice::chat
