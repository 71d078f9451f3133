#include "chat/chat_template.h"

#include "chat/template.h"
#include "util/error.h"

namespace sluice::chat {

std::string render_chat(const std::string& template_text, const ChatInputs& in,
                        const RenderLimits& limits) {
  const Template tpl(template_text);
  Dict vars;
  vars.emplace_back("messages", Value::from_json(in.messages));
  vars.emplace_back("tools", in.tools.is_null() ? Value::none() : Value::from_json(in.tools));
  vars.emplace_back("add_generation_prompt", Value::boolean(in.add_generation_prompt));
  vars.emplace_back("bos_token", Value::string(in.bos_token));
  vars.emplace_back("eos_token", Value::string(in.eos_token));
  vars.emplace_back("raise_exception", Value::function([](Args& a) -> Value {
                      throw Error("chat template: raise_exception: " + (a.pos.empty() ? std::string() : to_str(a.pos[0])));
                    }));
  const std::tm now = in.now;
  vars.emplace_back("strftime_now", Value::function([now](Args& a) {
                      const std::string fmt = a.pos.empty() ? std::string() : to_str(a.pos[0]);
                      char buf[256];
                      const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &now);
                      return Value::string(std::string(buf, n));
                    }));
  for (const auto& [k, v] : in.extra.items()) vars.emplace_back(k, Value::from_json(v));
  return tpl.render(vars, limits);
}

}  // namespace sluice::chat
