// `sluice run` / `sluice logits` command lines, exercised through the real
// binary: bad flags fail with a non-zero exit and a message naming the flag;
// -f reads the prompt as -p would; -s is the seed; -t never changes results.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "runtime/engine_options.h"
#include "test_support.h"

namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;

using sluice::test::CliResult;
using sluice::test::run_sluice;

// A file under the system temp dir, unique to this process, removed on exit.
struct ScratchFile {
  explicit ScratchFile(const std::string& name, const std::string& content = "")
      : path(fs::temp_directory_path() / ("sluice-cli-run-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path, std::ios::binary) << content;
  }
  ~ScratchFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  fs::path path;
};

// A model path that does not exist: every check below must fire before the
// model is opened, so the message names the flag, not the file.
constexpr const char* kNoModel = "-m /nonexistent/sluice-no-model.gguf";

void expect_flag_error(const std::string& args, const std::string& must_mention) {
  SCOPED_TRACE("sluice " + args);
  const CliResult r = run_sluice(args);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.status, -1) << "crashed: " << r.out;
  EXPECT_NE(r.out.find(must_mention), std::string::npos) << "expected '" << must_mention << "' in: " << r.out;
}

TEST(CliRunFlags, BadValuesNameTheFlag) {
  const std::string run = std::string("run ") + kNoModel + " -p hello ";
  expect_flag_error(run + "-t 0", "-t");
  expect_flag_error(run + "-t -3", "-t");
  expect_flag_error(run + "--threads abc", "--threads");
  expect_flag_error(run + "--io-threads 0", "--io-threads");
  expect_flag_error(run + "-n -1", "-n");
  expect_flag_error(run + "-c -5", "-c");
  expect_flag_error(run + "--dense-weights bogus", "--dense-weights");
  expect_flag_error(run + "--resident-layout tiled", "--resident-layout");
  expect_flag_error(run + "--kv-type q4", "--kv-type");
  expect_flag_error(run + "--seed notanumber", "--seed");
  expect_flag_error(run + "--no-such-flag", "--no-such-flag");
  expect_flag_error(run + "--io-engine bogus", "--io-engine: unknown I/O engine 'bogus'");
  expect_flag_error(run + "--io-depth 0", "--io-depth");
  expect_flag_error(run + "--route-replay /nonexistent/sluice-trace.jsonl", "--route-replay: /nonexistent/sluice-trace.jsonl");
}

TEST(CliRunFlags, BenchIoEngineFlagsAreChecked) {
  ScratchFile f("io-file", std::string(1 << 16, 'x'));
  const std::string io = "bench --io " + f.path.string() + " --buffered --sizes 4K --seconds 0.01 ";
  expect_flag_error(io + "--io-depth 4", "--io-depth: only applies with --io-engine uring");
  expect_flag_error(io + "--io-engine bogus", "--io-engine");
  expect_flag_error(io + "--io-engine uring --io-depth 0", "--io-depth");
  expect_flag_error(std::string("bench ") + kNoModel + " --io-engine uring --io-depth 4,8", "--io-depth");
}

// Issue-17 finding 10: -c 10^9 was std::bad_alloc; the KV size is checked
// against the memory available (naming -c and the bytes) before allocating.
TEST(CliRunFlags, HugeContextIsAKvSizeMessageNotBadAlloc) {
  const std::string model = sluice::test::shared_path("golden/qwen3moe-q8_0-q4_0.gguf");
  if (!fs::exists(model)) GTEST_SKIP() << model << " not found";
  expect_flag_error("run -m " + model + " -p hello -n 1 -c 1000000000", "-c 1000000000: the model state would need");
}

TEST(CliRunFlags, MtpFlagsAreChecked) {
  const std::string run = std::string("run ") + kNoModel + " -p hello ";
  expect_flag_error(run + "--mtp -1", "--mtp");
  expect_flag_error(run + "--mtp lots", "--mtp");
  expect_flag_error(run + "--mtp auto:0", "--mtp");
  expect_flag_error(run + "--mtp 1 --mtp-p-min 2", "--mtp-p-min");
  const std::string model = sluice::test::shared_path("golden/qwen3moe-q8_0-q4_0.gguf");
  if (!fs::exists(model)) GTEST_SKIP() << model << " not found";
  expect_flag_error("run -m " + model + " -p hello -n 1 --mtp 1", "has no NextN/MTP block");
}

// The front door: no command or an unknown one lists the commands; usage
// errors exit 2, runtime errors 1; --version names the build.
TEST(CliFrontDoor, MissingOrUnknownCommandListsTheCommands) {
  for (const char* args : {"", "bogus"}) {
    const CliResult r = run_sluice(args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.out.find("commands:\n  inspect"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  chat "), std::string::npos) << r.out;
  }
  EXPECT_NE(run_sluice("bogus").out.find("unknown command 'bogus'"), std::string::npos);
  EXPECT_EQ(run_sluice("run -p hi").status, 2);  // --model is required: a usage error
  EXPECT_EQ(run_sluice("run -m /nonexistent/x.gguf -p hi").status, 1);
  const CliResult v = run_sluice("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("sluice 0.1.0 (", 0), 0u) << v.out;
}

TEST(CliRunFlags, PromptMustComeFromExactlyOneOfPAndF) {
  ScratchFile prompt("prompt.txt", "Once upon a time");
  expect_flag_error(std::string("run ") + kNoModel, "-f FILE");
  expect_flag_error(std::string("run ") + kNoModel + " -p hi -f " + prompt.path.string(), "--file");
  expect_flag_error(std::string("run ") + kNoModel + " -f /nonexistent/sluice-prompt.txt",
                    "/nonexistent/sluice-prompt.txt");
  expect_flag_error(std::string("run ") + kNoModel + " -f /nonexistent/sluice-prompt.txt", "-f");
}

TEST(CliRunFlags, MissingModelIsNamed) {
  expect_flag_error("run -p hello", "--model");
  expect_flag_error(std::string("run ") + kNoModel + " -p hello", "/nonexistent/sluice-no-model.gguf");
  expect_flag_error(std::string("logits ") + kNoModel + " --tokens 1,2 -o /dev/null -t 0", "-t");
  expect_flag_error(std::string("logits ") + kNoModel + " --tokens 1,x -o /dev/null", "--tokens");
}

TEST(CliRunFlags, DefaultThreadCountIsOnlineCpus) {
  const int n = sluice::runtime::default_thread_count();
  EXPECT_GE(n, 1);
  EXPECT_EQ(static_cast<unsigned>(n), std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(sluice::runtime::EngineOptions{}.threads, n);
  // The help text shows the default.
  const CliResult r = run_sluice("run --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("-t,--threads INT=" + std::to_string(n) + " "), std::string::npos) << r.out;
}

const std::string kModel = "models/stories-moe-8x-q8_0.gguf";

TEST(CliRunModel, FileFlagGivesTheSameTextAsPromptFlag) {
  if (!sluice::test::shared_has(kModel)) GTEST_SKIP() << kModel << " not present in " << SLUICE_SHARED_DIR;
  const std::string model = sluice::test::shared_path(kModel);
  // A trailing newline is dropped, as llama.cpp's -f does.
  ScratchFile prompt("story.txt", "Once upon a time\n");
  const std::string common = "run -m " + model + " -n 12 --temp 0 -t 1";
  const CliResult via_p = run_sluice(common + " -p 'Once upon a time'", "2>/dev/null");
  const CliResult via_f = run_sluice(common + " -f " + prompt.path.string(), "2>/dev/null");
  ASSERT_EQ(via_p.status, 0) << via_p.out;
  ASSERT_EQ(via_f.status, 0) << via_f.out;
  EXPECT_EQ(via_p.out.rfind("Once upon a time", 0), 0u) << via_p.out;
  EXPECT_GT(via_p.out.size(), std::string("Once upon a time\n").size()) << "nothing generated";
  EXPECT_EQ(via_f.out, via_p.out);
}

TEST(CliRunModel, SeedFlagsAndThreadCountDoNotChangeSampledText) {
  if (!sluice::test::shared_has(kModel)) GTEST_SKIP() << kModel << " not present in " << SLUICE_SHARED_DIR;
  const std::string common = "run -m " + sluice::test::shared_path(kModel) + " -p 'Once upon' -n 16 --temp 0.9";
  const CliResult a = run_sluice(common + " -s 7 -t 1", "2>/dev/null");
  const CliResult b = run_sluice(common + " --seed 7 -t 3", "2>/dev/null");
  const CliResult c = run_sluice(common + " -s 7", "2>/dev/null");  // default -t
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out, c.out);
  // And -s is really the seed: another one samples another text (checked for
  // this model and prompt; the sampler is deterministic, so this cannot flake).
  const CliResult other = run_sluice(common + " -s 8 -t 1", "2>/dev/null");
  ASSERT_EQ(other.status, 0) << other.out;
  EXPECT_NE(a.out, other.out);
}

TEST(CliRunModel, SummaryReportsDecodeReadRates) {
  if (!sluice::test::shared_has(kModel)) GTEST_SKIP() << kModel << " not present in " << SLUICE_SHARED_DIR;
  const CliResult r = run_sluice("run -m " + sluice::test::shared_path(kModel) +
                                     " -p 'Once upon' -n 4 --temp 0 --ignore-eos -v",
                                 "2>&1 >/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("MiB read per token"), std::string::npos) << r.out;
  // stderr is a pipe here: no progress bar (carriage returns) may appear.
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
}

}  // namespace
