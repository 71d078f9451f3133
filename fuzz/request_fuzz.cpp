// libFuzzer target for the request bodies of `sluice serve`
// (server/request.*), called directly (no sockets): the first byte picks
// /v1/chat/completions (odd) or /v1/completions (even), the rest is the body.
//
// Contract checked: parse_json_body and parse_*_request either accept or
// throw RequestError (a 400); nothing else escapes, nothing crashes. An
// accepted request has every field in range (request.h, limits.h); a refusal's
// error body is valid JSON. An accepted chat request's messages and tools are
// then rendered through a ChatML-style template with tools, as serve's
// renderer would: that render may fail only with sluice::Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "server/errors.h"
#include "server/request.h"
#include "util/error.h"

namespace {

using namespace sluice::server;

constexpr const char* kTemplate =
    "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.content is string %}{{ m.content }}{% elif m.content %}"
    "{% for p in m.content %}{{ p.text if p is mapping else p }}{% endfor %}{% endif %}"
    "{%- for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

void check_ranges(const GenerationRequest& r, bool chat) {
  const auto& s = r.sampler;
  bool ok = r.max_tokens >= -1 && std::isfinite(s.temperature) && s.temperature >= 0 &&
            s.top_p > 0 && s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1 && s.top_k >= 0 &&
            s.repeat_penalty > 0 && r.stop.size() <= kMaxStopStrings;
  for (const auto& st : r.stop) ok = ok && !st.empty() && st.size() <= kMaxStopStringBytes;
  if (chat) {
    ok = ok && r.messages.is_array() && !r.messages.empty() && r.messages.size() <= kMaxMessages &&
         !r.prompt_text && !r.prompt_ids &&
         (r.tools.is_null() || (r.tools.is_array() && r.tools.size() <= kMaxTools));
  } else {
    ok = ok && (r.prompt_text.has_value() != r.prompt_ids.has_value());
    if (r.prompt_ids)
      for (int32_t id : *r.prompt_ids) ok = ok && id >= 0;
  }
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool chat = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  GenerationDefaults d;
  GenerationRequest r;
  try {
    const nlohmann::json body = parse_json_body(text);
    r = chat ? parse_chat_request(body, d) : parse_completion_request(body, d);
  } catch (const RequestError& e) {
    const std::string err = error_body(400, e.what());
    if (!nlohmann::json::accept(err)) std::abort();
    return 0;
  }
  check_ranges(r, chat);
  if (!chat) return 0;
  sluice::chat::ChatInputs in;
  in.messages = nlohmann::ordered_json::parse(r.messages.dump());
  if (!r.tools.is_null()) in.tools = nlohmann::ordered_json::parse(r.tools.dump());
  in.add_generation_prompt = true;
  try {
    (void)sluice::chat::render_chat(kTemplate, in);
  } catch (const sluice::Error&) {
  }
  return 0;
}
