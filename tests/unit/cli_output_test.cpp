// Output discipline of the generating commands (issue 16): -q prints only the
// generated text, the default one summary line on stderr, -v the full block,
// --json one object; eval --json is plain JSON; Ctrl-C stops `run` with its
// summary and status 130. Also the environment fallbacks, the context
// warning, inspect's -m and KV sizing, and cache-sim -m, all through the
// real binary on the bundled model.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

extern char** environ;

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::string model() { return source_path("models/stories-moe-8x-q8_0.gguf"); }
const std::string kPrompt = "Once upon a time";

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) out.push_back(text.substr(at, nl - at));
  if (at < text.size()) out.push_back(text.substr(at));
  return out;
}

// `sluice ARGS` with stdout and stderr captured apart.
struct Split {
  int status = -1;
  std::string out, err;
};
Split run_split(const std::string& args, const std::string& env = "") {
  TempDir dir;
  const std::string err = dir.file("err");
  Split r;
  r.out = run_cmd(env + " " + SLUICE_BINARY + " " + args + " 2>" + err, &r.status);
  r.err = file_bytes(err);
  return r;
}

TEST(CliOutput, QuietPrintsOnlyTheGeneratedText) {
  const std::string args = "run -m " + model() + " -p '" + kPrompt + "' -n 12 --temp 0 -s 1";
  const Split quiet = run_split(args + " -q");
  const Split normal = run_split(args);
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  ASSERT_EQ(normal.status, 0) << normal.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_GT(quiet.out.size(), 1u);
  EXPECT_EQ(normal.out, kPrompt + quiet.out);  // the default echoes the prompt first
  // Default: exactly one summary line on stderr.
  const std::vector<std::string> err = lines(normal.err);
  ASSERT_EQ(err.size(), 1u) << normal.err;
  EXPECT_EQ(err[0].rfind("sluice: decode 11 tokens at ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find(" tok/s (prompt 5 at "), std::string::npos) << err[0];
  EXPECT_NE(err[0].find(" MiB read/token; peak RSS "), std::string::npos) << err[0];
}

TEST(CliOutput, VerbosePrintsTheFullBlock) {
  const Split r = run_split("run -m " + model() + " -p '" + kPrompt + "' -n 4 --temp 0 --ignore-eos -v");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("sluice: prefill 5 tokens in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sluice: expert demand "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sluice: decode: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MiB read per token"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("SLUICE_DONE"), std::string::npos) << r.err;
  EXPECT_EQ(run_split("run -m " + model() + " -p x -q -v").status, 2);  // one or the other
}

TEST(CliOutput, JsonToStdoutIsTheOnlyThingThere) {
  const Split r = run_split("run -m " + model() + " -p '" + kPrompt + "' -n 6 --temp 0 -s 5 --json -");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails) on anything else in stdout
  const Split text = run_split("run -m " + model() + " -p '" + kPrompt + "' -n 6 --temp 0 -s 5 -q");
  EXPECT_EQ(j["text"].get<std::string>() + "\n", text.out);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["seed"], 5);
  EXPECT_EQ(j["summary"]["decode_tokens"], 5);
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;  // the summary line still goes to stderr
}

// Generated text is bytes: a byte token can end inside a UTF-8 character
// (every golden case's random weights do so within 16 tokens). --json must
// still be one valid JSON object, the bad bytes as U+FFFD, never a
// type_error from the JSON library.
TEST(CliOutput, RunJsonIsValidJsonOnEveryGoldenCase) {
  const std::string dir = shared_path("golden");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not found";
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    const Split r = run_split("run -m " + e.path().string() + " -p 'Once upon a time' -n 16 --temp 0 --ignore-eos --json -");
    if (r.status != 0 && r.err.find("unsupported architecture") != std::string::npos) continue;  // not yet runnable
    ASSERT_EQ(r.status, 0) << e.path() << ": " << r.err;
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << e.path() << ": " << r.out;
    EXPECT_TRUE(j["text"].is_string()) << e.path();
    EXPECT_EQ(j["finish_reason"], "length") << e.path();
    ++checked;
  }
  EXPECT_GE(checked, 12) << "fewer runnable golden cases than the 12 of the older architectures";
}

TEST(CliOutput, EvalJsonIsPlainJson) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not installed";
  TempDir dir;
  const std::string text = dir.file("t.txt");
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("Once upon a time, there was a little girl named Lily. She liked to play outside.\n", f);
    std::fclose(f);
  }
  int rc = -1;
  const std::string out = run_cmd(std::string(SLUICE_BINARY) + " eval -m " + model() + " -f " + text +
                                      " --ctx 8 --json 2>/dev/null | python3 -m json.tool",
                                  &rc);
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_GT(j["tokens_scored"].get<int>(), 0);
  EXPECT_GT(j["model"]["ppl"].get<double>(), 1.0);
  // Without --json: the table only, no machine line.
  const Split table = run_split("eval -m " + model() + " -f " + text + " --ctx 8");
  EXPECT_NE(table.out.find("perplexity"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find('{'), std::string::npos) << table.out;
}

// Ctrl-C while tokens stream: generation stops, the summary is printed, and
// the status is 130. Event-driven: the signal is sent once text has arrived.
TEST(CliOutput, SigintStopsRunWithItsSummary) {
  TempDir dir;
  const std::string err_path = dir.file("err");
  int out_pipe[2];
  ASSERT_EQ(::pipe(out_pipe), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, out_pipe[1]);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const std::string bin = SLUICE_BINARY, m = model();
  std::vector<std::string> args = {bin, "run", "-m", m, "-p", kPrompt, "-n", "20000", "-c", "20100",
                                   "--ignore-eos", "--temp", "0", "-q", "--json", dir.file("r.json")};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  std::string out;
  char buf[256];
  while (out.size() < 8) {  // some generated text: the token loop is running
    const ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    ASSERT_GT(n, 0) << "the run ended before any text";
    out.append(buf, static_cast<size_t>(n));
  }
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  for (ssize_t n; (n = ::read(out_pipe[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(out_pipe[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const nlohmann::json j = nlohmann::json::parse(file_bytes(dir.file("r.json")));
  EXPECT_EQ(j["finish_reason"], "interrupted");
  EXPECT_LT(j["summary"]["decode_tokens"].get<int>(), 20000);
  EXPECT_EQ(j["text"].get<std::string>() + "\n", out);  // the text so far, then the closing newline
  EXPECT_EQ(file_bytes(err_path), "");  // -q: no notice, no summary line
}

TEST(CliOutput, SigintSummaryLineWithoutQuiet) {
  // The same stop without -q: the notice and the summary line are on stderr.
  TempDir dir;
  const std::string err_path = dir.file("err");
  int out_pipe[2];
  ASSERT_EQ(::pipe(out_pipe), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, out_pipe[1]);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const std::string bin = SLUICE_BINARY, m = model();
  std::vector<std::string> args = {bin, "run", "-m", m, "-p", kPrompt, "-n", "20000", "-c", "20100",
                                   "--ignore-eos", "--temp", "0"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  std::string out;
  char buf[256];
  while (out.size() < kPrompt.size() + 8) {
    const ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    ASSERT_GT(n, 0) << "the run ended before any text";
    out.append(buf, static_cast<size_t>(n));
  }
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  for (ssize_t n; (n = ::read(out_pipe[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(out_pipe[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const std::vector<std::string> err = lines(file_bytes(err_path));
  ASSERT_EQ(err.size(), 3u) << file_bytes(err_path);
  EXPECT_NE(err[0].find("above the"), std::string::npos) << err[0];  // -c 20100 is past the trained context
  EXPECT_EQ(err[1], "sluice: generation stopped (Ctrl-C)");
  EXPECT_NE(err[2].find(" tok/s "), std::string::npos) << err[2];
}

TEST(CliEnv, TrimVariablesShowANoticeAndYieldToTheFlag) {
  TempDir dir;
  const std::string text = dir.file("t.txt");
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("Once upon a time, there was a little girl named Lily.\n", f);
    std::fclose(f);
  }
  const std::string eval = "eval -m " + model() + " -f " + text + " --ctx 8 --json";
  auto top_k = [](const Split& r) { return nlohmann::json::parse(r.out)["trims"]["top_k"].get<int>(); };
  struct Case {
    std::string env;
    std::string flags;
    int top_k;
    std::string notice;  // "" none
  };
  const std::vector<Case> cases = {
      {"SLUICE_TOPK=1", "", 1, "sluice: environment SLUICE_TOPK=1 in force (as --moe-top-k 1; the flag wins when given)"},
      {"TOPK=1", "", 1, "sluice: environment TOPK=1 in force (as --moe-top-k 1;"},
      {"SLUICE_TOPK=1 TOPK=2", "", 1, "SLUICE_TOPK=1"},
      {"SLUICE_TOPK=1", "--moe-top-k 2", 2, ""},
      {"SLUICE_EXPERT_BUDGET=3", "", 0, "sluice: environment SLUICE_EXPERT_BUDGET=3 in force (as --expert-budget 3;"},
      {"SLUICE_TOPP=0.5", "", 0, "sluice: environment SLUICE_TOPP=0.5 in force (as --moe-top-p 0.5;"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.env + " sluice " + eval + " " + c.flags);
    const Split r = run_split(eval + " " + c.flags, "env -u SLUICE_TOPK -u TOPK -u SLUICE_TOPP -u TOPP -u "
                                                    "SLUICE_EXPERT_BUDGET -u EXPERT_BUDGET " + c.env);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(top_k(r), c.top_k);
    if (c.notice.empty()) {
      EXPECT_EQ(r.err.find("environment"), std::string::npos) << r.err;
    } else {
      EXPECT_NE(r.err.find(c.notice), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("environment", r.err.find("environment") + 1), std::string::npos) << "one line: " << r.err;
    }
  }
  const Split bad = run_split(eval, "env TOPK=x");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("TOPK=x: not an integer"), std::string::npos) << bad.err;
}

TEST(CliContext, InspectSizesKvAtRunsContextAndReadsDashM) {
  const Split pos = run_split("inspect " + model() + " --json");
  const Split dash_m = run_split("inspect -m " + model() + " --json");
  ASSERT_EQ(pos.status, 0) << pos.err;
  ASSERT_EQ(dash_m.status, 0) << dash_m.err;
  EXPECT_EQ(pos.out, dash_m.out);
  const nlohmann::json j = nlohmann::json::parse(dash_m.out);
  const int train = j["hyperparameters"]["context_length"].get<int>();
  EXPECT_EQ(j["kv_context"].get<int>(), std::min(train, 4096));  // run's default
  EXPECT_EQ(nlohmann::json::parse(run_split("inspect -m " + model() + " -c 100 --json").out)["kv_context"], 100);
  // run -n -1 fills exactly that context.
  const Split full = run_split("run -m " + model() + " -p hi -n -1 --ignore-eos --temp 0");
  EXPECT_EQ(full.status, 0);
  EXPECT_NE(full.err.find("context full (" + std::to_string(std::min(train, 4096)) + " positions)"),
            std::string::npos)
      << full.err;
  EXPECT_EQ(run_split("inspect").status, 2);
  EXPECT_EQ(run_split("inspect -m a.gguf b.gguf").status, 2);
  // -c above the trained context: one warning line; at it, none.
  const std::string run = "run -m " + model() + " -p hi -n 1 --temp 0 -c ";
  EXPECT_EQ(run_split(run + std::to_string(train)).err.find("warning"), std::string::npos);
  const Split above = run_split(run + std::to_string(train + 1));
  EXPECT_EQ(above.status, 0);
  EXPECT_NE(above.err.find("sluice: warning: -c " + std::to_string(train + 1) + " is above the " +
                           std::to_string(train) + " positions this model was trained on"),
            std::string::npos)
      << above.err;
}

TEST(CliContext, InspectNamesTheFileType) {
  const Split r = run_split("inspect -m " + model());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("Q8_0 (7)"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(run_split("inspect -m " + model() + " --json").out)["file"]["file_type_name"],
            "Q8_0");
}

}  // namespace
}  // namespace sluice::test
