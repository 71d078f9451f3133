#include "runtime/chat.h"

#include <algorithm>

#include <ctime>

#include "chat/chat_template.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::runtime {

std::string plain_chat_prompt(const nlohmann::json& messages, const nlohmann::json& /*tools*/,
                              bool add_generation_prompt) {
  std::string out;
  for (const auto& m : messages) {
    const std::string role = m.value("role", "");
    const std::string content = m.value("content", "");
    if (!out.empty()) out += "\n\n";
    if (role == "system") out += content;
    else if (role == "user") out += "User: " + content;
    else out += "Assistant: " + content;  // content is stored without a leading space
  }
  if (add_generation_prompt) out += (out.empty() ? "" : "\n\n") + std::string("Assistant:");
  return out;
}

ChatRenderer model_chat_renderer(const gguf::GgufModel& model, const tokenizer::Tokenizer& tok, bool* has_template,
                                 const nlohmann::json& template_kwargs) {
  if (!template_kwargs.is_null() && !template_kwargs.is_object())
    throw Error("chat template kwargs: expected a JSON object, e.g. {\"enable_thinking\": false}");
  const std::optional<std::string> tmpl = model.metadata().get_string("tokenizer.chat_template");
  if (has_template) *has_template = tmpl.has_value();
  if (!tmpl) return plain_chat_prompt;
  auto special = [&tok](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  const std::string bos = special(tok.bos()), eos = special(tok.eos());
  const nlohmann::ordered_json extra = template_kwargs.is_null() ? nlohmann::ordered_json::object()
                                                                 : nlohmann::ordered_json::parse(json_text(template_kwargs));
  return [text = *tmpl, bos, eos, extra](const nlohmann::json& messages, const nlohmann::json& tools, bool add_gen) {
    chat::ChatInputs in;
    in.extra = extra;
    in.messages = nlohmann::ordered_json::parse(json_text(messages));
    // OpenAI clients send `content: null` for an assistant message that only
    // calls tools, but templates treat content as a string (Qwen3's
    // `'</think>' in message.content` fails on null, in Python too): null
    // becomes "", as llama.cpp does for such templates.
    for (auto& m : in.messages)
      if (m.is_object() && m.contains("content") && m["content"].is_null()) m["content"] = "";
    if (!tools.is_null()) in.tools = nlohmann::ordered_json::parse(json_text(tools));
    in.add_generation_prompt = add_gen;
    in.bos_token = bos;
    in.eos_token = eos;
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &in.now);
    return chat::render_chat(text, in);
  };
}

ChatConversation::ChatConversation(Session& session, const tokenizer::Tokenizer& tok, ChatRenderer render,
                                   std::string system)
    : session_(session), tok_(tok), render_(std::move(render)) {
  if (!system.empty()) messages_.push_back({{"role", "system"}, {"content", std::move(system)}});
  for (int32_t id : {tok.eos(), tok.eot()})
    if (id >= 0) stop_ids_.push_back(id);
}

std::vector<int32_t> ChatConversation::render_tokens(bool add_generation_prompt, std::string* text_out) const {
  // Special tokens the template writes (<|im_start|>, ...) are special
  // tokens; a template that writes the BOS itself gets no second one.
  const std::string text = render_(messages_, nullptr, add_generation_prompt);
  if (text_out) *text_out = text;
  const bool has_bos = tok_.bos() >= 0 && text.rfind(tok_.token_text(tok_.bos()), 0) == 0;
  return tok_.encode(text, !has_bos, true);
}

bool ChatConversation::answer_starts_in_reasoning(chat_output::OutputFormat format) const {
  return chat_output::prompt_opens_reasoning(prompt_text_, format);
}

void ChatConversation::reset() {
  nlohmann::json kept = nlohmann::json::array();
  if (!messages_.empty() && messages_.front().value("role", "") == "system") kept.push_back(messages_.front());
  messages_ = std::move(kept);
  session_.reset();
}

ChatTurnResult ChatConversation::turn(const std::string& user, Sampler& sampler, int n_predict,
                                      const std::function<bool(const std::string&)>& on_piece) {
  ChatTurnResult r;
  messages_.push_back({{"role", "user"}, {"content", user}});
  const std::vector<int32_t> prompt = render_tokens(true, &prompt_text_);
  if (static_cast<int>(prompt.size()) >= session_.model().n_ctx()) {
    messages_.erase(messages_.end() - 1);
    r.context_full = true;
    return r;
  }
  // Reuse the longest common prefix with what the session evaluated.
  size_t keep = session_.common_prefix(prompt);
  if (keep == prompt.size()) --keep;  // evaluate at least the last token: its logits start the answer
  session_.rewind(keep);
  const std::vector<int32_t> delta(prompt.begin() + static_cast<std::ptrdiff_t>(keep), prompt.end());
  r.prompt_tokens_fed = static_cast<int>(delta.size());
  std::string answer;
  const GenerationStats st = session_.generate(
      delta, n_predict, sampler,
      [&](int32_t id) {
        ++r.tokens;
        if (tok_.is_eog(id)) return false;  // end of sequence or of the turn (<|im_end|>, <|eot_id|>, ...)
        const std::string piece = tok_.token_to_piece(id, false);
        answer += piece;
        if (!on_piece(piece)) {
          r.interrupted = true;
          return false;
        }
        return true;
      },
      stop_ids_);
  r.context_full = st.context_full;
  r.text = answer;
  // Stored as a message is written (no leading space: the renderer puts its
  // own separator), so the re-rendered conversation tokenizes as generated.
  const size_t first = answer.find_first_not_of(' ');
  messages_.push_back({{"role", "assistant"}, {"content", first == std::string::npos ? "" : answer.substr(first)}});
  return r;
}

}  // namespace sluice::runtime
