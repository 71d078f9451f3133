// `sluice chat -m MODEL`: an interactive conversation. The model stays loaded
// and its KV cache and expert cache stay warm between turns; Ctrl-C stops the
// current answer without ending the chat; a full context ends the answer with
// a notice. Commands: /reset (forget the conversation), /exit (or Ctrl-D).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/line_input.h"
#include "cli/sampler_flags.h"
#include "cli/sigint.h"
#include "cli/stdout_output.h"
#include "chat_output/chat_output.h"
#include "chat_output/chat_output_stream.h"
#include "runtime/chat.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

namespace sluice::cli {
namespace {

struct ChatOptions {
  runtime::EngineOptions engine;
  SamplerFlags sampling;
  std::string system;   // --system
  int n_predict = -1;   // per answer; -1: until end of sequence or a full context
  std::string template_kwargs;  // --chat-template-kwargs: a JSON object of extra template variables
  std::string save_path;        // --save: the session's state, written when the chat ends
  std::string load_path;        // --load: a state saved before, restored before the first turn
};

// --chat-template-kwargs text -> a JSON object (null when not given).
nlohmann::json parse_template_kwargs(const std::string& text) {
  if (text.empty()) return nullptr;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error("--chat-template-kwargs: expected a JSON object, e.g. '{\"enable_thinking\": false}' (got '" + text +
                "')");
  return j;
}

// On a terminal the answer is split as serve splits it (chat_output/
// chat_output.h): reasoning dimmed, tool calls on lines of their own; where
// the template opened the reasoning block in the prompt (Qwen3.5's "<think>\n")
// the answer starts as reasoning. Elsewhere (pipes, tests) it is printed as
// generated.
class AnswerPrinter {
 public:
  AnswerPrinter(chat_output::OutputFormat format, bool split, const runtime::ChatConversation& chat)
      : format_(format), split_(split && format != chat_output::OutputFormat::Plain), chat_(chat) {}
  void piece(const std::string& text) {
    if (!split_) return out(text);
    // The first piece comes after turn() rendered this turn's prompt.
    if (!parser_) parser_.emplace(format_, chat_.answer_starts_in_reasoning(format_));
    show(parser_->push(text));
  }
  void finish() {
    if (parser_) show(parser_->finish());
  }

 private:
  void show(const chat_output::ParsedOutput& p) {
    if (!p.reasoning_content.empty()) {
      out("\033[2m" + p.reasoning_content + "\033[0m");
      after_reasoning_ = true;
    }
    if (!p.content.empty()) {
      if (after_reasoning_) out("\n");
      after_reasoning_ = false;
      out(p.content);
    }
    for (const auto& c : p.tool_calls)
      out("\n[tool call] " + c["function"]["name"].get<std::string>() + " " +
          c["function"]["arguments"].get<std::string>() + "\n");
  }
  chat_output::OutputFormat format_;
  bool split_;
  const runtime::ChatConversation& chat_;
  std::optional<chat_output::OutputParser> parser_;
  bool after_reasoning_ = false;  // the last thing shown was reasoning
};

void run_chat(ChatOptions& o) {
  parse_template_kwargs(o.template_kwargs);  // a bad flag is named before the model loads
  if (o.n_predict < -1) throw Error("-n: must be >= 0, or -1 for no limit (got " + std::to_string(o.n_predict) + ")");
  const runtime::SamplerConfig sampler_cfg = resolve_sampler(o.sampling);
  const model::ModelConfig cfg = o.engine.to_model_config();
  runtime::Session session = runtime::Session::open(o.engine.model_path, cfg);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(session.gguf().metadata());
  bool has_template = false;
  runtime::ChatRenderer render =
      runtime::model_chat_renderer(session.gguf(), tok, &has_template, parse_template_kwargs(o.template_kwargs));
  if (!has_template)
    std::fprintf(stderr, "sluice: the model has no chat template; using the plain User:/Assistant: format\n");
  const chat_output::OutputFormat format = chat_output::output_format_for(
      session.gguf().architecture(), session.gguf().metadata().get_string("tokenizer.chat_template").value_or(""));
  runtime::ChatConversation chat(session, tok, render, o.system);
  if (!o.load_path.empty()) {
    const size_t n = session.load_state(o.load_path);
    std::fprintf(stderr, "sluice: restored %zu tokens from %s (a conversation starting with them reuses them)\n", n,
                 o.load_path.c_str());
  }
  runtime::Sampler sampler(sampler_cfg);
  SigintToFlag sigint;
  LineInput input;
  std::fprintf(stderr, "sluice: chat ready (/reset forgets the conversation, /exit or Ctrl-D ends; Ctrl-C stops an "
                       "answer; end a line with \\ to continue it)\n");
  for (;;) {
    clear_sigint();
    const std::optional<std::string> line = input.read("> ");
    if (!line) break;
    if (sigint_received()) {  // Ctrl-C at the prompt: a fresh prompt
      out("\n");
      continue;
    }
    if (*line == "/exit" || *line == "/quit") break;
    if (*line == "/reset") {
      chat.reset();
      std::fprintf(stderr, "sluice: conversation reset\n");
      continue;
    }
    if (line->empty()) continue;
    AnswerPrinter printer(format, ::isatty(STDOUT_FILENO) == 1, chat);
    const runtime::ChatTurnResult r = chat.turn(*line, sampler, o.n_predict, [&](const std::string& piece) {
      printer.piece(piece);
      flush_stdout();
      return !sigint_received();
    });
    printer.finish();
    out("\n");
    flush_stdout();
    if (r.interrupted) std::fprintf(stderr, "sluice: answer stopped (Ctrl-C)\n");
    if (r.context_full)
      std::fprintf(stderr, "sluice: context full (%d positions): %s; /reset to start over or raise -c\n",
                   session.model().n_ctx(), r.tokens > 0 ? "answer stopped" : "this message does not fit");
  }
  if (!o.save_path.empty()) {
    const size_t n = session.save_state(o.save_path);
    std::fprintf(stderr, "sluice: saved %zu tokens to %s\n", n, o.save_path.c_str());
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto opts = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "talk to a model interactively (the model stays loaded and warm)");
  add_engine_flags(cmd, opts->engine);
  add_sampler_flags(cmd, opts->sampling);
  cmd->add_option("--system", opts->system, "system prompt");
  cmd->add_option("-n,--n-predict", opts->n_predict, "most tokens per answer (-1: until end of sequence)")
      ->capture_default_str();
  cmd->add_option("--chat-template-kwargs", opts->template_kwargs,
                  "extra chat template variables as a JSON object, e.g. '{\"enable_thinking\": false}' (Qwen3, "
                  "Qwen3.5: answer without thinking)");
  cmd->add_option("--save", opts->save_path,
                  "when the chat ends, write the conversation's evaluated tokens and model state to FILE (the slot "
                  "file format of `sluice serve --slot-save-path`)");
  cmd->add_option("--load", opts->load_path,
                  "before the first turn, restore a state written by --save (or a server's slot save) for this "
                  "model and -c: the part of the conversation it holds (e.g. a long --system prompt) is not "
                  "evaluated again");
  cmd->footer(
      "Examples:\n"
      "  sluice chat -m model.gguf\n"
      "  sluice chat -m model.gguf --system 'You are terse.' --temp 0.7 --cache-mb auto\n"
      "  sluice chat -m qwen3.6-35b-a3b.gguf --chat-template-kwargs '{\"enable_thinking\": false}'");
  cmd->callback([opts] { run_chat(*opts); });
}

}  // namespace sluice::cli
