// llama.cpp habits (cli/habit_flags.h) and -e escapes: the rewrite table
// itself, then every habit through the real binary (exit code and message).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/escapes.h"
#include "cli/habit_flags.h"
#include "test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using Args = std::vector<std::string>;

TEST(HabitFlags, MapsToSluicesFlags) {
  auto args = [](const Args& in) { return cli::rewrite_habit_flags(in).args; };
  EXPECT_EQ(args({"run", "-m", "x", "-ub", "64"}), (Args{"run", "-m", "x", "--ubatch", "64"}));
  EXPECT_EQ(args({"run", "--ubatch-size=64"}), (Args{"run", "--ubatch", "64"}));
  EXPECT_EQ(args({"run", "-ctk", "f32"}), (Args{"run", "--kv-type", "f32"}));
  // -ctk and -ctv agreeing: one --kv-type; the flag itself given too: dropped.
  EXPECT_EQ(args({"run", "-ctk", "f32", "-ctv", "f32"}), (Args{"run", "--kv-type", "f32"}));
  EXPECT_EQ(args({"run", "--kv-type", "f32", "-ctv", "f32"}), (Args{"run", "--kv-type", "f32"}));
  EXPECT_EQ(args({"run", "--no-mmap"}), (Args{"run", "--dense-weights", "anon"}));
  EXPECT_EQ(args({"run", "--mmap"}), (Args{"run", "--dense-weights", "mmap"}));
  EXPECT_EQ(args({"chat", "-sys", "Be brief", "-cnv"}), (Args{"chat", "--system", "Be brief"}));
  EXPECT_EQ(args({"run", "-tb", "4"}), (Args{"run", "-t", "4"}));
  EXPECT_EQ(args({"run", "-t", "2", "-tb", "4"}), (Args{"run", "-t", "2"}));
  EXPECT_EQ(args({"run", "-ngl", "99", "-fa", "on", "-mli", "-b", "512", "-no-cnv", "-p", "x"}),
            (Args{"run", "-p", "x"}));
  EXPECT_EQ(args({"run", "-fa", "-p", "x"}), (Args{"run", "-p", "x"}));  // -fa's value is optional
  EXPECT_EQ(args({"run", "-ngl", "-1"}), (Args{"run"}));                   // a negative number is a value
  // After `--`, and before a command, nothing is rewritten.
  EXPECT_EQ(args({"run", "--", "-ngl"}), (Args{"run", "--", "-ngl"}));
  EXPECT_EQ(args({"--version", "-ngl", "1"}), (Args{"--version", "-ngl", "1"}));
}

TEST(HabitFlags, NoticesSayWhyAHabitDoesNothing) {
  const cli::HabitRewrite r = cli::rewrite_habit_flags({"run", "-ngl", "99", "-fa", "-t", "2", "-tb", "4", "-ub", "8"});
  ASSERT_EQ(r.notices.size(), 3u);
  EXPECT_EQ(r.notices[0],
            "sluice: -ngl 99 ignored: sluice computes on the CPU and streams experts from disk; there are no layers "
            "to offload");
  EXPECT_EQ(r.notices[1], "sluice: -fa ignored: sluice has one CPU attention kernel; there is nothing to switch");
  EXPECT_EQ(r.notices[2].rfind("sluice: -tb 4 ignored: sluice uses one thread count (-t)", 0), 0u) << r.notices[2];
  EXPECT_EQ(cli::rewrite_habit_flags({"run", "-tb", "4"}).notices.at(0).rfind("sluice: -tb 4 read as -t 4: ", 0), 0u);
  EXPECT_TRUE(cli::rewrite_habit_flags({"run", "-ub", "8", "--mmap", "-ctk", "f16"}).notices.empty());
}

TEST(HabitFlags, RefusalsAreUsageErrorsNamingTheHabit) {
  auto error = [](const Args& in) -> std::string {
    try {
      cli::rewrite_habit_flags(in);
    } catch (const CLI::ValidationError& e) {
      EXPECT_EQ(e.get_exit_code(), static_cast<int>(CLI::ExitCodes::ValidationError));
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error({"run", "-cnv"}), "-cnv: not a `sluice run` flag: for a conversation use `sluice chat -m MODEL`");
  EXPECT_EQ(error({"chat", "-no-cnv"}).rfind("-no-cnv: not a `sluice chat` flag: `sluice chat` is the conversation", 0),
            0u);
  EXPECT_EQ(error({"run", "-sys", "x"}).rfind("-sys: not a `sluice run` flag: a system prompt belongs", 0), 0u);
  EXPECT_EQ(error({"run", "-ctk", "f16", "-ctv", "f32"}), "-ctv f32: contradicts -ctk f16 (both set --kv-type)");
  EXPECT_EQ(error({"run", "--dense-weights", "anon", "--mmap"}),
            "--mmap: contradicts --dense-weights anon (both set --dense-weights)");
  EXPECT_EQ(error({"run", "-ngl"}), "-ngl: needs a value");
  EXPECT_EQ(error({"run", "-ub", "-p", "x"}), "-ub: needs a value");
}

TEST(Escapes, AsLlamaCppProcessesThem) {
  EXPECT_EQ(cli::process_escapes(R"(a\nb\tc\\d\"e\'f\x41\x7a\r)", "-p"), "a\nb\tc\\d\"e'fAz\r");
  EXPECT_EQ(cli::process_escapes(R"(C:\path\q)", "-p"), R"(C:\path\q)");  // unknown: kept as typed
  EXPECT_EQ(cli::process_escapes("end\\", "-p"), "end\\");
  EXPECT_EQ(error_of([] { cli::process_escapes(R"(ab\x4)", "-p"); }), "-p: \\x needs two hex digits (at byte 2)");
}

// ---- through the binary ----

std::string model() { return source_path("models/stories-moe-8x-q8_0.gguf"); }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct HabitCase {
  std::string args;     // after `sluice run -m MODEL -p hi -n 1 --temp 0` (or a whole command line: see chat)
  int status;           // expected exit status
  std::string message;  // expected on stderr ("" none)
  int ignored;          // expected " ignored: " notice lines
};

TEST(HabitFlagsCli, EveryHabitHasItsExitCodeAndMessage) {
  const std::string run = "run -m " + model() + " -p hi -n 1 --temp 0 ";
  const std::vector<HabitCase> cases = {
      {run + "-ngl 99", 0, "sluice: -ngl 99 ignored: sluice computes on the CPU", 1},
      {run + "--n-gpu-layers 99", 0, "sluice: --n-gpu-layers 99 ignored:", 1},
      {run + "-fa", 0, "sluice: -fa ignored: sluice has one CPU attention kernel", 1},
      {run + "-fa on", 0, "sluice: -fa on ignored:", 1},
      {run + "-mli", 0, "sluice: -mli ignored: `sluice chat` always continues", 1},
      {run + "-b 512", 0, "sluice: -b 512 ignored: sluice evaluates the whole prompt in micro-batches", 1},
      {run + "-no-cnv", 0, "sluice: -no-cnv ignored: only `sluice chat` converses", 1},
      {run + "-cnv", 2, "-cnv: not a `sluice run` flag: for a conversation use `sluice chat -m MODEL`", 0},
      {run + "-sys hello", 2, "use `sluice chat -m MODEL --system TEXT`", 0},
      {run + "-ctk f32", 0, "", 0},
      {run + "-ctk f16 -ctv f16", 0, "", 0},
      {run + "-ctk q8_0", 2, "--kv-type: q8_0 not in {f16,f32}", 0},
      {run + "-ctk f16 -ctv f32", 2, "-ctv f32: contradicts -ctk f16 (both set --kv-type)", 0},
      {run + "-ub 64", 0, "", 0},
      {run + "-ub 0", 1, "--ubatch: must be >= 1", 0},
      {run + "-tb 2", 0, "sluice: -tb 2 read as -t 2: sluice uses one thread count (-t)", 0},
      {run + "-t 1 -tb 2", 0, "sluice: -tb 2 ignored: sluice uses one thread count (-t)", 1},
      {run + "--no-mmap", 0, "", 0},
      {run + "--mmap", 0, "", 0},
      {run + "--mmap --dense-weights anon", 2, "--mmap: contradicts --dense-weights anon", 0},
      {run + "-ngl", 2, "-ngl: needs a value", 0},
      {run + "-ngl 99 -q", 0, "", 0},  // -q silences notices too
      {"chat -m " + model() + " -n 1 -sys 'Be brief.' -cnv -mli </dev/null", 0, "sluice: -mli ignored:", 1},
      {"chat -m " + model() + " -no-cnv </dev/null", 2, "-no-cnv: not a `sluice chat` flag", 0},
  };
  for (const HabitCase& c : cases) {
    SCOPED_TRACE("sluice " + c.args);
    const CliResult r = run_sluice(c.args, "2>&1 >/dev/null");  // stderr only
    EXPECT_EQ(r.status, c.status) << r.out;
    if (!c.message.empty()) {
      EXPECT_NE(r.out.find(c.message), std::string::npos) << r.out;
    }
    EXPECT_EQ(count(r.out, " ignored: "), c.ignored) << r.out;
    if (c.args.find(" -q") != std::string::npos) {
      EXPECT_EQ(r.out, "");
    }
  }
}

TEST(HabitFlagsCli, PromptFromStdinAndEscapes) {
  const std::string run = "run -m " + model() + " -n 6 --temp 0 -q ";
  const CliResult via_p = run_sluice(run + "-p 'Once upon a time'", "2>/dev/null");
  int rc = -1;
  const std::string via_stdin =
      run_cmd("printf 'Once upon a time\\n' | " + std::string(SLUICE_BINARY) + " " + run + "-f - 2>/dev/null", &rc);
  ASSERT_EQ(via_p.status, 0);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(via_stdin, via_p.out);
  EXPECT_FALSE(via_p.out.empty());
  // -e turns \x20 into a space: the same prompt as typed plainly.
  const CliResult escaped = run_sluice(run + "-e -p 'Once\\x20upon a\\ttime'", "2>/dev/null");
  const CliResult plain = run_sluice(run + "-p \"$(printf 'Once upon a\\ttime')\"", "2>/dev/null");
  ASSERT_EQ(escaped.status, 0);
  EXPECT_EQ(escaped.out, plain.out);
  EXPECT_EQ(run_sluice(run + "-e -p 'bad\\x4'").status, 1);
}

}  // namespace
}  // namespace sluice::test
