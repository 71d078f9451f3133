// Issue 17 "Lose nothing, hang never" (outputs, writes, inputs), one test per
// finding, through the real binary on a synthesized tiny model:
//  1 repack M.partial M            -> RepackTiny.InputNamedLikeTheOldScratchFileSurvives (repack_test.cpp)
//  2 output flags replace inputs   -> CliOutputs.OutputFlagsNeverReplaceAnInput, SynthRefusesAnExistingFileWithoutForce
//  3 failed / killed synth         -> CliOutputs.AFailedOrKilledSynthLeavesTheDestinationAsItWas
//  4 failed logits looks complete  -> CliOutputs.AFailedLogitsWriteLeavesNoFile
//  5 --route-trace /dev/full rc 0  -> CliOutputs.FileOutputWriteErrorsSurface
//  6 stdout never checked          -> CliOutputs.StdoutWriteErrorsFailTheCommand, ClosedStdoutStopsQuietly
//  7 -f DIR, read errors, /dev/zero-> CliOutputs.PromptFilesAreBoundedRegularFiles
// 13 sampler flags unchecked       -> CliOutputs.SamplerFlagsOutOfRangeNameTheFlag
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "tools/synth.h"

extern char** environ;

namespace sluice {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::CliResult;
using test::file_bytes;
using test::run_sluice;

size_t entries(const fs::path& dir) { return std::distance(fs::directory_iterator(dir), fs::directory_iterator()); }

class CliOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("sluice-cli-outputs-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    tools::synth_model(tools::synth_preset("tiny"), model(), 2);
    model_bytes_ = file_bytes(model());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    dir_ = nullptr;
  }
  // Each test works in its own subdirectory, so leftovers are countable.
  void SetUp() override {
    work_ = *dir_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(work_);
  }
  static std::string model() { return (*dir_ / "tiny.gguf").string(); }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = (work_ / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string path(const std::string& name) const { return (work_ / name).string(); }
  static void expect_model_intact() { EXPECT_TRUE(file_bytes(model()) == model_bytes_) << model() << " changed"; }

  static fs::path* dir_;
  static inline std::string model_bytes_;
  fs::path work_;
};
fs::path* CliOutputs::dir_ = nullptr;

void expect_failure(const CliResult& r, const std::vector<std::string>& must_mention) {
  EXPECT_EQ(r.status, 1) << r.out;
  for (const std::string& s : must_mention) EXPECT_THAT(r.out, HasSubstr(s));
}

// ---- finding 2 --------------------------------------------------------------

TEST_F(CliOutputs, OutputFlagsNeverReplaceAnInput) {
  const std::string m = model();
  const std::string prompt = file("prompt.txt", "hello");
  fs::create_symlink(m, path("link.gguf"));
  struct Case {
    std::string args, flag;
  };
  const std::vector<Case> cases = {
      {"run -m " + m + " -p hi -n 2 --route-trace " + m, "--route-trace " + m},
      {"run -m " + m + " -p hi -n 2 --csv " + m, "--csv " + m},
      {"logits -m " + m + " --tokens 1,2 -o " + m, "-o " + m},
      {"logits -m " + m + " --tokens 1,2 -o " + path("link.gguf"), "-o " + path("link.gguf")},
      {"run -m " + m + " -f " + prompt + " -n 2 --route-trace " + prompt, "--route-trace " + prompt},
      {"run -m " + m + " -f " + prompt + " -n 2 --csv " + prompt, "--csv " + prompt},
      {"eval -m " + m + " -f " + prompt + " --route-trace " + prompt, "--route-trace " + prompt},
      {"synth -q --force -o " + m + " --vocab " + m, "-o " + m},
      {"repack --force " + m + " " + m, m},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    expect_failure(run_sluice(c.args), {c.flag + ": is an input of this command"});
  }
  expect_model_intact();
  EXPECT_EQ(file_bytes(prompt), "hello");
}

TEST_F(CliOutputs, SynthRefusesAnExistingFileWithoutForce) {
  const std::string dest = file("old.gguf", "an older model");
  expect_failure(run_sluice("synth -q -o " + dest), {"-o " + dest, "already exists (pass --force to overwrite it)"});
  EXPECT_EQ(file_bytes(dest), "an older model");
  const CliResult r = run_sluice("synth -q --force -o " + dest);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(file_bytes(dest), model_bytes_);  // the same seed and preset: the same bytes
  EXPECT_EQ(entries(work_), 1u);
}

// ---- findings 3 and 4: failed and killed writers -----------------------------

// Runs sluice with its file size limited to 16 blocks, so every model or
// logits write fails part-way: with SIGXFSZ ignored the write fails with
// EFBIG (a failed run); with its default action the process is killed.
CliResult run_size_limited(const std::string& args, bool killed) {
  CliResult r;
  const std::string trap = killed ? "" : "trap '' XFSZ; ";
  r.out = test::run_cmd("ulimit -f 16; " + trap + "exec " + SLUICE_BINARY + " " + args + " 2>&1", &r.status);
  return r;
}

TEST_F(CliOutputs, AFailedOrKilledSynthLeavesTheDestinationAsItWas) {
  const std::string dest = file("model.gguf", "the model that was here");
  const CliResult failed = run_size_limited("synth -q --force -o " + dest, false);
  expect_failure(failed, {dest, "File too large"});
  EXPECT_EQ(file_bytes(dest), "the model that was here");
  EXPECT_EQ(entries(work_), 1u);

  const CliResult killed = run_size_limited("synth -q --force -o " + dest, true);
  EXPECT_EQ(killed.status, -1) << "expected death by SIGXFSZ: " << killed.out;
  EXPECT_EQ(file_bytes(dest), "the model that was here");
  const CliResult fresh = run_size_limited("synth -q -o " + path("new.gguf"), true);
  EXPECT_EQ(fresh.status, -1) << fresh.out;
  EXPECT_FALSE(fs::exists(path("new.gguf")));
}

TEST_F(CliOutputs, AFailedLogitsWriteLeavesNoFile) {
  std::string tokens = "1";
  for (int i = 2; i <= 64; ++i) tokens += "," + std::to_string(i);  // 64 x 512 x 4 = 128 KiB of logits
  const std::string out = path("run.f32");
  expect_failure(run_size_limited("logits -m " + model() + " --tokens " + tokens + " -o " + out, false),
                 {"-o " + out, "File too large"});
  EXPECT_FALSE(fs::exists(out));
  const std::string old = file("old.f32", "previous result");
  expect_failure(run_size_limited("logits -m " + model() + " --tokens " + tokens + " -o " + old, false),
                 {"File too large"});
  EXPECT_EQ(file_bytes(old), "previous result");
  EXPECT_EQ(entries(work_), 1u);
  // Unlimited, the file is complete: exactly n_tokens x n_vocab floats.
  const CliResult ok = run_sluice("logits -m " + model() + " --tokens " + tokens + " -o " + out);
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(fs::file_size(out), 64u * 512u * sizeof(float));
}

// ---- finding 5 --------------------------------------------------------------

TEST_F(CliOutputs, FileOutputWriteErrorsSurface) {
  const std::string m = model();
  expect_failure(run_sluice("run -m " + m + " -p hi -n 2 --route-trace /dev/full"),
                 {"--route-trace /dev/full: write failed: No space left on device"});
  expect_failure(run_sluice("run -m " + m + " -p hi -n 2 --csv /dev/full"),
                 {"--csv /dev/full: write failed: No space left on device"});
  expect_failure(run_sluice("logits -m " + m + " --tokens 1,2 -o /dev/full"),
                 {"-o /dev/full: write failed: No space left on device"});
  expect_failure(run_sluice("synth -q -o /dev/full"), {"-o /dev/full: write failed: No space left on device"});
  // Devices are written in place (not refused as "existing", never renamed over).
  for (const std::string& args : {std::string("synth -o /dev/null"), "repack " + m + " /dev/null"}) {
    const CliResult r = run_sluice(args);
    EXPECT_EQ(r.status, 0) << args << ": " << r.out;
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // The same outputs to files: complete, replacing what was there.
  const std::string trace = file("trace.jsonl", "stale");
  const std::string csv = file("t.csv", "stale");
  const CliResult ok = run_sluice("run -m " + m + " -p hi -n 2 --route-trace " + trace + " --csv " + csv);
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_THAT(file_bytes(trace), AllOf(HasSubstr("{\"experts\":"), Not(HasSubstr("stale"))));
  EXPECT_EQ(file_bytes(csv).rfind("index,", 0), 0u) << file_bytes(csv);
  EXPECT_EQ(entries(work_), 2u);
}

// ---- finding 6 --------------------------------------------------------------

TEST_F(CliOutputs, StdoutWriteErrorsFailTheCommand) {
  const std::string m = model();
  const std::string trace = path("trace.jsonl");
  ASSERT_EQ(run_sluice("run -m " + m + " -p hi -n 2 --route-trace " + trace, ">/dev/null 2>&1").status, 0);
  const std::string text = file("text.txt", "hello world, this is a short text to score");
  for (const std::string& args : {"run -m " + m + " -p hi -n 4", "tokenize -m " + m + " -p hello", "inspect " + m,
                                  "logits -m " + m + " --tokens 1,2 -o -",
                                  "cache-sim --expert-mib 1 --cache-mb 8 --trace " + trace,
                                  "eval -m " + m + " -f " + text + " --ctx 8",
                                  "bench -m " + m + " -p 4 -n 2 -r 1"}) {
    SCOPED_TRACE(args);
    // stderr to the captured pipe, stdout to the full device.
    expect_failure(run_sluice(args, "2>&1 >/dev/full"), {"write failed: No space left on device"});
  }
  // The run failed at its first token: its trace and CSV describe no finished
  // run, so neither appears.
  const std::string trace2 = path("failed.jsonl"), csv2 = path("failed.csv");
  expect_failure(run_sluice("run -m " + m + " -p hi -n 4 --route-trace " + trace2 + " --csv " + csv2,
                            "2>&1 >/dev/full"),
                 {"stdout: write failed"});
  EXPECT_FALSE(fs::exists(trace2));
  EXPECT_FALSE(fs::exists(csv2));
}

// SIGPIPE ignored, EPIPE is a quiet stop: status 141, nothing on stderr. The
// reader is closed before sluice starts, so this does not depend on timing.
TEST_F(CliOutputs, ClosedStdoutStopsQuietly) {
  const std::string m = model();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "-m", m, "-p", "hi", "-n", "64", "--ignore-eos"},
        std::vector<std::string>{"tokenize", "-m", m, "-p", "hello"}, std::vector<std::string>{"inspect", m}}) {
    SCOPED_TRACE(args[0]);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ::close(fds[0]);
    const std::string err = path("stderr.txt");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv{const_cast<char*>(SLUICE_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, SLUICE_BINARY, &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 141);
    EXPECT_EQ(file_bytes(err), "");
  }
}

// ---- finding 7 --------------------------------------------------------------

TEST_F(CliOutputs, PromptFilesAreBoundedRegularFiles) {
  const std::string run = "run -m " + model() + " -n 2 ";
  expect_failure(run_sluice(run + "-f " + work_.string()), {"-f " + work_.string() + ": is a directory"});
  expect_failure(run_sluice(run + "-f /dev/zero"), {"-f /dev/zero: is not a regular file"});
  // A read error part-way is an error, not a shorter prompt (a directory as
  // stdin opens fine and fails on read with EISDIR).
  expect_failure(run_sluice(run + "-f - < " + work_.string()), {"-f - (stdin): read failed: Is a directory"});
  const std::string big = path("big.txt");
  { std::ofstream(big) << "x"; }
  fs::resize_file(big, (uint64_t{64} << 20) + 1);  // sparse: costs no disk
  expect_failure(run_sluice(run + "-f " + big), {"-f " + big, "above the 64 MiB limit"});
  // stdin works, within the limit.
  const CliResult ok = run_sluice(run + "--temp 0 -f - < " + file("p.txt", "hello\n"), "2>/dev/null");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_EQ(ok.out.rfind("hello", 0), 0u) << ok.out;
}

// ---- finding 13 (command-line part) ------------------------------------------

TEST(CliSamplerFlags, SamplerFlagsOutOfRangeNameTheFlag) {
  const std::string run = "run -m /nonexistent/sluice-no-model.gguf -p hello ";
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--temp nan", "--temp"},
           {"--temp -1", "--temp"},
           {"--temp inf", "--temp"},
           {"--top-p 0", "--top-p"},
           {"--top-p 1.5", "--top-p"},
           {"--top-p nan", "--top-p"},
           {"--min-p -0.1", "--min-p"},
           {"--min-p 2", "--min-p"},
           {"--min-p nan", "--min-p"},
           {"--repeat-penalty 0", "--repeat-penalty"},
           {"--repeat-penalty -1", "--repeat-penalty"},
           {"--repeat-penalty nan", "--repeat-penalty"}}) {
    SCOPED_TRACE(args);
    const CliResult r = run_sluice(run + args);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr("sluice: error: " + flag + ": must be")) << r.out;
  }
  // In range: accepted (the run then fails on the missing model, not on the flag).
  const CliResult ok = run_sluice(run + "--temp 0.7 --top-p 1 --min-p 0 --repeat-penalty 1.1");
  EXPECT_THAT(ok.out, HasSubstr("/nonexistent/sluice-no-model.gguf"));
}

}  // namespace
}  // namespace sluice
