// A chat conversation over a Session: messages in, the rendered prompt's
// tokens fed incrementally, answers out. Between turns the KV cache keeps the
// conversation (only the tokens after the longest common prefix with what is
// already evaluated are fed) and the expert cache stays warm.
//
// The prompt renderer is injected: the model's chat template (tokenizer.
// chat_template) where there is one, else plain_chat_prompt.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_output/chat_output.h"
#include "gguf/gguf.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

// messages (OpenAI-style array of {role, content, ...}) and tools (array of
// tool schemas, or null) -> prompt text.
using ChatRenderer =
    std::function<std::string(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt)>;

// The format for models without a chat template: an optional system text,
// then "User: ...\n\nAssistant: ..." turns separated by blank lines, ending
// with "Assistant:" when a reply is wanted. Tools are not shown.
std::string plain_chat_prompt(const nlohmann::json& messages, const nlohmann::json& tools, bool add_generation_prompt);

// The model's own chat template (tokenizer.chat_template) as a renderer
// (chat::render_chat with the vocabulary's BOS/EOS texts and the local time
// for strftime_now), or plain_chat_prompt when the file has none.
// `has_template` (optional) tells which. `template_kwargs` (a JSON object, or
// null) are extra template variables, e.g. {"enable_thinking": false} for
// Qwen3/Qwen3.5 (llama.cpp's --chat-template-kwargs).
ChatRenderer model_chat_renderer(const gguf::GgufModel& model, const tokenizer::Tokenizer& tok,
                                 bool* has_template = nullptr, const nlohmann::json& template_kwargs = nullptr);

struct ChatTurnResult {
  std::string text;         // the answer, as shown
  int tokens = 0;           // tokens generated
  int prompt_tokens_fed = 0;  // tokens evaluated for this turn's prompt (after the reused prefix)
  bool interrupted = false;   // on_piece asked to stop
  bool context_full = false;  // the context ran out (answer kept as far as it got)
};

class ChatConversation {
 public:
  ChatConversation(Session& session, const tokenizer::Tokenizer& tok, ChatRenderer render, std::string system);

  // Adds the user's message and generates the answer, calling on_piece with
  // each piece of text (return false to interrupt). n_predict < 0: until end
  // of sequence or a full context. A prompt that does not fit the context is
  // reported as context_full with no answer (the message is dropped again).
  ChatTurnResult turn(const std::string& user, Sampler& sampler, int n_predict,
                      const std::function<bool(const std::string&)>& on_piece);
  // Forgets the conversation (the system message stays); the KV cache is
  // rewound, the expert cache keeps its experts.
  void reset();
  const nlohmann::json& messages() const { return messages_; }
  // Whether the current turn's rendered prompt leaves a reasoning block open
  // (Qwen3.5's template ends with "<think>\n"), so the answer starts inside
  // reasoning: valid once turn() has rendered the prompt (its on_piece calls
  // may ask), false before the first turn.
  bool answer_starts_in_reasoning(chat_output::OutputFormat format) const;

 private:
  std::vector<int32_t> render_tokens(bool add_generation_prompt, std::string* text_out = nullptr) const;

  Session& session_;
  const tokenizer::Tokenizer& tok_;
  ChatRenderer render_;
  nlohmann::json messages_ = nlohmann::json::array();
  std::vector<int32_t> stop_ids_;
  std::string prompt_text_;  // the current turn's rendered prompt
};

}  // namespace sluice::runtime
