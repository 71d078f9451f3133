// `sluice chat`: turns keep the conversation in the KV cache (only the new
// message is evaluated), /reset forgets it, Ctrl-C stops an answer without
// ending the chat, and the plain format for models without a template.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/whole_file.h"
#include "model_test_support.h"
#include "synth_test_support.h"
#include "tool_call_model.h"
#include "runtime/chat.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::string stories() { return source_path("models/stories-moe-8x-q8_0.gguf"); }

TEST(Chat, PlainFormatForModelsWithoutATemplate) {
  const nlohmann::json m = nlohmann::json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"Story?"}])");
  EXPECT_EQ(runtime::plain_chat_prompt(m, nullptr, true), "Be brief.\n\nUser: Hi\n\nAssistant: Hello.\n\nUser: Story?\n\nAssistant:");
  EXPECT_EQ(runtime::plain_chat_prompt(nlohmann::json::array(), nullptr, true), "Assistant:");
}

TEST(Chat, LaterTurnsEvaluateOnlyTheNewMessage) {
  runtime::Session s = runtime::Session::open(stories(), golden_config());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(s.gguf().metadata());
  runtime::ChatConversation chat(s, tok, runtime::plain_chat_prompt, "You tell stories.");
  runtime::Sampler greedy(runtime::SamplerConfig{});
  auto ignore = [](const std::string&) { return true; };
  const runtime::ChatTurnResult first = chat.turn("Once upon a time there was a cat.", greedy, 16, ignore);
  EXPECT_GT(first.tokens, 0);
  EXPECT_FALSE(first.text.empty());
  const size_t first_prompt = static_cast<size_t>(first.prompt_tokens_fed);
  const runtime::ChatTurnResult second = chat.turn("What did the cat do?", greedy, 16, ignore);
  const size_t full = tok.encode(runtime::plain_chat_prompt(chat.messages(), nullptr, false), true, true).size();
  // The conversation is in the cache: the first turn's whole prompt is reused,
  // only the answer's re-tokenised tail and the new message are fed.
  EXPECT_GT(second.prompt_tokens_fed, 0);
  EXPECT_LE(static_cast<size_t>(second.prompt_tokens_fed) + first_prompt, full - static_cast<size_t>(second.tokens))
      << second.prompt_tokens_fed << " fed; first prompt " << first_prompt << ", conversation " << full;
  EXPECT_EQ(chat.messages().size(), 5u);  // system + 2 x (user, assistant)
  chat.reset();
  EXPECT_EQ(chat.messages().size(), 1u);
  const runtime::ChatTurnResult again = chat.turn("Once upon a time there was a cat.", greedy, 16, ignore);
  EXPECT_EQ(again.text, first.text);  // the same first turn, from a rewound cache
}

// A child `sluice chat` with stdin/stdout pipes (stderr folded into stdout).
struct ChatChild {
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string seen;

  // pty = true: on a pseudo-terminal (line editing on; Ctrl-C typed as ^C
  // reaches sluice through the terminal as SIGINT); else through pipes.
  explicit ChatChild(const std::string& args, bool pty = false) {
    if (pty) {
      int master = -1;
      pid = ::forkpty(&master, nullptr, nullptr, nullptr);
      if (pid == 0) exec_sluice(args);
      in = out = master;
      return;
    }
    int to[2], from[2];
    EXPECT_EQ(::pipe(to), 0);
    EXPECT_EQ(::pipe(from), 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(to[0], 0);
      ::dup2(from[1], 1);
      ::dup2(from[1], 2);
      ::close(to[1]);
      ::close(from[0]);
      exec_sluice(args);
    }
    ::close(to[0]);
    ::close(from[1]);
    in = to[1];
    out = from[0];
  }
  [[noreturn]] static void exec_sluice(const std::string& args) {
      // exec sluice itself (not a shell), so signals reach it.
      std::vector<std::string> words = {SLUICE_BINARY, "chat"};
      for (size_t a = 0, b; a < args.size(); a = b + 1) {
        b = args.find(' ', a);
        if (b == std::string::npos) b = args.size();
        if (b > a) words.push_back(args.substr(a, b - a));
      }
      std::vector<char*> argv;
      for (std::string& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
  }
  ~ChatChild() {
    if (in >= 0) ::close(in);
    if (out >= 0 && out != in) ::close(out);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  void send(const std::string& s) { ASSERT_EQ(::write(in, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
  // Reads until `what` appears in the output (true) or the time runs out.
  bool wait_for(const std::string& what, int seconds = 60) {
    return wait_until([&] { return seen.find(what) != std::string::npos; }, seconds);
  }
  template <class Done>
  bool wait_until(Done done, int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      pollfd p{out, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(out, buf, sizeof buf);
      if (n <= 0) return false;
      seen.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  int finish() {
    if (in != out) {
      ::close(in);
      in = -1;
    }
    wait_for("\x01", 30);  // drain until the child closes its output
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

TEST(ChatCli, CtrlCStopsTheAnswerAndTheChatGoesOn) {
  // Random weights never end an answer: with a 4096-position context the
  // answer runs for seconds, long enough to interrupt.
  REQUIRE_SHARED("golden/deepseek2-f32.gguf");
  ChatChild c("-m " + shared_path("golden/deepseek2-f32.gguf") + " -c 4096 -t 1");
  ASSERT_TRUE(c.wait_for("chat ready")) << c.seen;
  c.send("Tell me a story\n");
  const size_t mark = c.seen.size();
  ASSERT_TRUE(c.wait_until([&] { return c.seen.size() >= mark + 100; }, 30)) << c.seen;  // the answer is streaming
  ::kill(c.pid, SIGINT);
  ASSERT_TRUE(c.wait_for("answer stopped (Ctrl-C)", 30)) << c.seen;
  c.send("/reset\n");
  ASSERT_TRUE(c.wait_for("conversation reset", 30)) << c.seen;
  c.send("/exit\n");
  EXPECT_EQ(c.finish(), 0) << c.seen;
  EXPECT_EQ(c.seen.find("error"), std::string::npos) << c.seen;
}

// The same at a terminal: libedit reads the lines, ^C typed mid-answer stops
// it through the terminal's SIGINT, and the chat takes the next message.
TEST(ChatCli, OnATerminalCtrlCStopsTheAnswerAndTheChatGoesOn) {
  REQUIRE_SHARED("golden/deepseek2-f32.gguf");
  ChatChild c("-m " + shared_path("golden/deepseek2-f32.gguf") + " -c 4096 -t 1", true);
  ASSERT_TRUE(c.wait_for("chat ready")) << c.seen;
  ASSERT_TRUE(c.wait_for("> ")) << c.seen;
  c.send("Tell me a story\r");
  const size_t mark = c.seen.size();
  ASSERT_TRUE(c.wait_until([&] { return c.seen.size() >= mark + 200; }, 30)) << c.seen;
  c.send("\x03");  // Ctrl-C
  ASSERT_TRUE(c.wait_for("answer stopped (Ctrl-C)", 30)) << c.seen;
  const size_t after = c.seen.size();
  c.send("Again\r");
  // The next message is answered: the answer either ends by itself (an
  // end-of-generation token; the prompt comes back) or runs on and is
  // stopped again. Which one depends on the build's float rounding.
  const auto prompt_back = [&] {
    const size_t p = c.seen.rfind("\n> ");
    return p != std::string::npos && p > after + 12;
  };
  ASSERT_TRUE(c.wait_until([&] { return c.seen.size() >= after + 200 || prompt_back(); }, 30)) << c.seen;
  if (!prompt_back()) {
    c.send("\x03");
    ASSERT_TRUE(c.wait_until([&] { return c.seen.rfind("answer stopped (Ctrl-C)") > after; }, 30)) << c.seen;
  }
  c.send("/exit\r");
  EXPECT_EQ(c.finish(), 0) << c.seen;
}

// A model whose answer is a tool call (tool_call_model.h): at a terminal it
// is shown split as serve splits it, through a pipe as generated.
TEST(ChatCli, AToolCallIsShownAsOneAtATerminal) {
  REQUIRE_SHARED("data/chat-templates/Qwen-Qwen3-0.6B.jinja");
  TempFile model("tool_call.gguf");
  write_tool_call_model(model.path.string(),
                        io::read_whole_file(shared_path("data/chat-templates/Qwen-Qwen3-0.6B.jinja"), 1 << 20));
  ChatChild tty("-m " + model.path.string() + " --no-odirect --temp 0", true);
  ASSERT_TRUE(tty.wait_for("> ")) << tty.seen;
  tty.send("Weather in Paris?\r");
  ASSERT_TRUE(tty.wait_for("[tool call] get_weather {\"city\":\"Paris\"}", 30)) << tty.seen;
  tty.send("/exit\r");
  EXPECT_EQ(tty.finish(), 0) << tty.seen;
  EXPECT_EQ(tty.seen.find("<tool_call>"), std::string::npos) << tty.seen;

  ChatChild pipe("-m " + model.path.string() + " --no-odirect --temp 0");
  pipe.send("Weather in Paris?\n/exit\n");
  EXPECT_EQ(pipe.finish(), 0) << pipe.seen;
  EXPECT_NE(pipe.seen.find(std::string("<tool_call>") + kCallBody + "</tool_call>"), std::string::npos) << pipe.seen;
}

TEST(ChatCli, AnswersOnTheBundledModelAndKeepsGoing) {
  ChatChild c("-m " + stories() + " -n 24");
  c.send("Once upon a time there was a cat.\nWhat did the cat do?\n/exit\n");
  EXPECT_EQ(c.finish(), 0) << c.seen;
  EXPECT_NE(c.seen.find("the model has no chat template"), std::string::npos) << c.seen;
  // Two answers of story text.
  EXPECT_GT(c.seen.size(), 150u) << c.seen;
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace SLUICE_TEST_FILE {

// A model's own template is what chat renders (here Qwen3's, over a shared
// vocabulary file with the template added to its metadata).
TEST(Chat, TheModelsTemplateRendersTheConversation) {
  REQUIRE_SHARED("vocab/ggml-vocab-gpt2-pre-qwen2.gguf");
  REQUIRE_SHARED("data/chat-templates/Qwen-Qwen3-0.6B.jinja");
  gguf::ParsedFile pf = gguf::GgufModel::open(shared_path("vocab/ggml-vocab-gpt2-pre-qwen2.gguf")).split(0);
  std::ifstream f(shared_path("data/chat-templates/Qwen-Qwen3-0.6B.jinja"));
  const std::string tmpl((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  pf.metadata.add("tokenizer.chat_template", gguf::Value::from_string(tmpl));
  const gguf::GgufModel g = gguf::GgufModel::from_parsed({pf});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(g.metadata());
  bool has = false;
  const runtime::ChatRenderer r = runtime::model_chat_renderer(g, tok, &has);
  EXPECT_TRUE(has);
  const nlohmann::json m = nlohmann::json::parse(R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}])");
  EXPECT_EQ(r(m, nullptr, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Without a template: the plain format, and it says so.
  const gguf::GgufModel plain = gguf::GgufModel::open(shared_path("vocab/ggml-vocab-gpt2-pre-qwen2.gguf"));
  EXPECT_EQ(runtime::model_chat_renderer(plain, tok, &has)(m, nullptr, true), "Be brief.\n\nUser: Hi\n\nAssistant:");
  EXPECT_FALSE(has);
}

// --chat-template-kwargs reach the template: Qwen3.5's enable_thinking=false
// closes the reasoning block in the generation prompt.
TEST(Chat, TemplateKwargsReachTheTemplate) {
  REQUIRE_SHARED("vocab/ggml-vocab-gpt2-pre-qwen2.gguf");
  REQUIRE_SHARED("data/chat-templates/Qwen3.5-4B.jinja");
  gguf::ParsedFile pf = gguf::GgufModel::open(shared_path("vocab/ggml-vocab-gpt2-pre-qwen2.gguf")).split(0);
  std::ifstream f(shared_path("data/chat-templates/Qwen3.5-4B.jinja"));
  const std::string tmpl((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  pf.metadata.add("tokenizer.chat_template", gguf::Value::from_string(tmpl));
  const gguf::GgufModel g = gguf::GgufModel::from_parsed({pf});
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(g.metadata());
  const nlohmann::json m = nlohmann::json::parse(R"([{"role":"user","content":"Hi"}])");
  const std::string thinking = runtime::model_chat_renderer(g, tok)(m, nullptr, true);
  EXPECT_TRUE(thinking.ends_with("<|im_start|>assistant\n<think>\n")) << thinking;
  const std::string direct =
      runtime::model_chat_renderer(g, tok, nullptr, {{"enable_thinking", false}})(m, nullptr, true);
  EXPECT_TRUE(direct.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << direct;
  EXPECT_NE(test::error_of([&] { runtime::model_chat_renderer(g, tok, nullptr, nlohmann::json::array()); }).find(
                "expected a JSON object"),
            std::string::npos);
}

// The conversation tells whether this turn's prompt opened a reasoning block,
// so chat's printer starts the answer as reasoning (Qwen3.5's "<think>\n").
TEST(Chat, TheAnswerStartsInReasoningWhereThePromptOpensIt) {
  runtime::Session s = runtime::Session::open(stories(), golden_config());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(s.gguf().metadata());
  auto opens = [](const nlohmann::json& msgs, const nlohmann::json& tools, bool gen) {
    return runtime::plain_chat_prompt(msgs, tools, gen) + (gen ? " <think>\n" : "");
  };
  runtime::Sampler greedy(runtime::SamplerConfig{});
  for (const bool open : {false, true}) {
    runtime::ChatConversation chat(s, tok, open ? runtime::ChatRenderer(opens) : runtime::plain_chat_prompt, "");
    EXPECT_FALSE(chat.answer_starts_in_reasoning(chat_output::OutputFormat::QwenXml));  // no turn yet
    bool asked = false, seen = false;
    chat.turn("Once upon a time", greedy, 2, [&](const std::string&) {
      if (!asked) seen = chat.answer_starts_in_reasoning(chat_output::OutputFormat::QwenXml);
      asked = true;
      return true;
    });
    EXPECT_TRUE(asked);
    EXPECT_EQ(seen, open);
    EXPECT_FALSE(chat.answer_starts_in_reasoning(chat_output::OutputFormat::Plain));  // Plain has no reasoning tags
    chat.reset();
  }
}

// A bad --chat-template-kwargs is named before the model loads.
TEST(ChatCli, BadTemplateKwargsAreNamed) {
  const CliResult r = run_sluice("chat -m " + stories() + " --chat-template-kwargs '[1]' </dev/null");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--chat-template-kwargs: expected a JSON object"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sluice::test
