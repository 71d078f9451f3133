// The bash completion generated from CLI11 definitions (cli/completion.h):
// exact script lines for a small app, and the installed command's script
// completing real commands and flags in bash.
#include "cli/completion.h"

#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace sluice::cli {
namespace SLUICE_TEST_FILE {

TEST(Completion, ListsVisibleCommandsAndFlags) {
  CLI::App app{"a tool", "tool"};
  app.set_version_flag("--version", "tool 1");
  CLI::App* go = app.add_subcommand("go", "go somewhere");
  std::string where, secret;
  bool fast = false;
  go->add_option("-w,--where", where, "where");
  go->add_flag("--fast", fast, "quickly");
  go->add_option("--secret", secret, "hidden")->group("");
  go->add_option("target", where, "a positional");
  app.add_subcommand("stop", "stop");
  app.add_subcommand("internal", "hidden command")->group("");
  const std::string script = bash_completion(app);
  EXPECT_NE(script.find("\n_tool() {\n"), std::string::npos) << script;
  EXPECT_NE(script.find("\n    \"\") words=\"-h --help --version go stop\" ;;\n"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("\n    go) words=\"-h --help -w --where --fast\" ;;\n"), std::string::npos)
      << script;
  EXPECT_NE(script.find("\n    stop) words=\"-h --help\" ;;\n"), std::string::npos) << script;
  EXPECT_EQ(script.find("internal"), std::string::npos) << "hidden commands are not offered";
  EXPECT_EQ(script.find("secret"), std::string::npos) << "hidden options are not offered";
  EXPECT_NE(script.find("\ncomplete -o default -F _tool tool\n"), std::string::npos) << script;
}

// Completions bash gives for the words of a command line (the last one being typed).
std::string complete(const std::string& words) {
  int rc = -1;
  const std::string out = test::run_cmd(
      "bash --norc --noprofile -c 'source <(\"$0\" completion bash) && COMP_WORDS=(" + words +
          ") && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && _sluice && echo \"${COMPREPLY[*]}\"' " +
          SLUICE_BINARY + " 2>&1",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

TEST(Completion, SluiceScriptCompletesInBash) {
  EXPECT_EQ(complete("sluice r"), "run route-predict repack\n");
  EXPECT_EQ(complete("sluice to"), "tokenize\n");
  EXPECT_EQ(complete("sluice --vers"), "--version\n");
  EXPECT_EQ(complete("sluice run --top-"), "--top-k --top-p\n");
  EXPECT_EQ(complete("sluice run -m model.gguf --pro"), "--prompt --progress\n");
  EXPECT_EQ(complete("sluice run -m model.gguf -p"), "-p\n");
  EXPECT_EQ(complete("sluice run -m x"), "\n") << "a value is left to file completion";
  const test::CliResult bad = test::run_sluice("completion zsh");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("zsh"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace sluice::cli
