// io::OutputFile (commit / abort / refusing inputs / non-regular destinations /
// overwrite) and io::read_text_input (regular files under a limit, read
// errors are errors). The command-line findings of issue 17 are in
// cli_outputs_test.cpp.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/output_file.h"
#include "io/text_input.h"
#include "test_support.h"
#include "util/error.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using test::error_of;
using test::file_bytes;

// A fresh directory per test, so "nothing else was left behind" is checkable.
struct Dir {
  Dir() : path(fs::temp_directory_path() / ("sluice-output-file-" + std::to_string(::getpid()) + "-" + next())) {
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static std::string next() {
    static int n = 0;
    return std::to_string(n++);
  }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  size_t entries() const { return std::distance(fs::directory_iterator(path), fs::directory_iterator()); }
  fs::path path;
};

TEST(OutputFile, CommitReplacesTheDestinationOnlyAtCommit) {
  Dir d;
  const std::string dest = d.file("out.bin", "old contents");
  io::OutputFile out(dest);
  EXPECT_TRUE(out.renames());
  out.write("new ");
  out.write(std::string(200000, 'x'));  // past the buffer: goes straight to the file
  EXPECT_EQ(file_bytes(dest), "old contents");  // nothing visible before commit
  out.commit();
  EXPECT_EQ(file_bytes(dest), "new " + std::string(200000, 'x'));
  EXPECT_EQ(out.bytes_written(), 200004u);
  EXPECT_EQ(d.entries(), 1u);  // no temporary file left
  EXPECT_THAT(error_of([&] { out.write("more"); }), HasSubstr("after commit"));
}

TEST(OutputFile, DestroyedWithoutCommitLeavesTheDestinationAsItWas) {
  Dir d;
  const std::string dest = d.file("out.bin", "old");
  { io::OutputFile out(dest); out.write(std::string(100000, 'y')); }
  EXPECT_EQ(file_bytes(dest), "old");
  { io::OutputFile out(d / "new.bin"); out.write("z"); }
  EXPECT_FALSE(fs::exists(d / "new.bin"));
  EXPECT_EQ(d.entries(), 1u);
}

TEST(OutputFile, RefusesEveryInputByIdentityNotByName) {
  Dir d;
  const std::string model = d.file("model.gguf", "MODEL");
  const std::string vocab = d.file("vocab.gguf", "VOCAB");
  fs::create_hard_link(model, d / "hard.gguf");
  fs::create_symlink(vocab, d / "link.gguf");
  const io::OutputOptions opts{.flag = "-o", .inputs = {"", model, d / "missing", vocab}, .overwrite = true};
  for (const std::string& dest : {model, vocab, d / "hard.gguf", d / "link.gguf", d.path.string() + "/./model.gguf"}) {
    SCOPED_TRACE(dest);
    EXPECT_THAT(error_of([&] { io::OutputFile out(dest, opts); }),
                AllOf(HasSubstr("-o " + dest), HasSubstr("is an input of this command")));
  }
  EXPECT_EQ(file_bytes(model), "MODEL");
  EXPECT_EQ(file_bytes(vocab), "VOCAB");
  // Another file is fine, and the refusal is checked again at commit.
  io::OutputFile out(d / "fresh.bin", opts);
  out.write("x");
  fs::create_hard_link(model, d / "fresh.bin");  // the destination became the model meanwhile
  EXPECT_THAT(error_of([&] { out.commit(); }), HasSubstr("is an input of this command"));
  EXPECT_EQ(file_bytes(model), "MODEL");
}

TEST(OutputFile, WithoutOverwriteAnExistingFileIsRefused) {
  Dir d;
  const std::string dest = d.file("model.gguf", "keep");
  const io::OutputOptions no_force{.flag = "", .inputs = {}, .overwrite = false};
  EXPECT_THAT(error_of([&] { io::OutputFile out(dest, no_force); }),
              AllOf(HasSubstr(dest), HasSubstr("already exists (pass --force to overwrite it)")));
  EXPECT_EQ(file_bytes(dest), "keep");
  // Appearing between construction and commit is caught too.
  io::OutputFile late(d / "late.gguf", no_force);
  late.write("mine");
  d.file("late.gguf", "theirs");
  EXPECT_THAT(error_of([&] { late.commit(); }), HasSubstr("already exists"));
  EXPECT_EQ(file_bytes(d / "late.gguf"), "theirs");
  // --force: replaced.
  io::OutputFile forced(dest, {.flag = "", .inputs = {}, .overwrite = true});
  forced.write("new");
  forced.commit();
  EXPECT_EQ(file_bytes(dest), "new");
}

TEST(OutputFile, KeepsTheModeOfAReplacedFile) {
  Dir d;
  const std::string dest = d.file("out.csv", "old");
  ASSERT_EQ(::chmod(dest.c_str(), 0640), 0);
  io::OutputFile out(dest);
  out.write("new");
  out.commit();
  struct stat st {};
  ASSERT_EQ(::stat(dest.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST(OutputFile, NonRegularDestinationsAreWrittenInPlaceAndTheirErrorsSurface) {
  {
    io::OutputFile out("/dev/null");
    EXPECT_FALSE(out.renames());
    out.write(std::string(300000, 'n'));
    out.commit();
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));  // still the device, never renamed over
  // /dev/full: the small write is buffered, so the error comes from commit's flush.
  io::OutputFile full("/dev/full", {.flag = "--route-trace", .inputs = {}, .overwrite = false});
  full.write("a line\n");
  EXPECT_THAT(error_of([&] { full.commit(); }),
              AllOf(HasSubstr("--route-trace /dev/full"), HasSubstr("No space left on device")));
  io::OutputFile big("/dev/full");
  EXPECT_THAT(error_of([&] { big.write(std::string(300000, 'f')); }), HasSubstr("No space left on device"));
  Dir d;
  EXPECT_THAT(error_of([&] { io::OutputFile out(d.path.string()); }), HasSubstr("is a directory"));
  EXPECT_THAT(error_of([&] { io::OutputFile out("/nonexistent-dir/x.bin"); }), HasSubstr("/nonexistent-dir/x.bin"));
}

// SIGKILL mid-write (no destructor runs): the destination keeps its old
// contents and, with O_TMPFILE, no temporary file is left either.
TEST(OutputFile, AKilledWriterLeavesTheDestinationAsItWas) {
  Dir d;
  const std::string dest = d.file("model.gguf", "complete old model");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    io::OutputFile out(dest);
    out.write(std::string(1 << 20, 'p'));
    ::kill(::getpid(), SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(file_bytes(dest), "complete old model");
  EXPECT_EQ(d.entries(), 1u);
}

// Where the file system has no O_TMPFILE: a hidden named file beside the
// destination, renamed at commit, removed when not committed.
TEST(OutputFile, TheNamedTemporaryFallbackKeepsTheSamePromises) {
  Dir d;
  const io::OutputOptions named{.flag = "", .inputs = {}, .overwrite = true, .anonymous_temp = false};
  const std::string dest = d.file("out.bin", "old");
  {
    io::OutputFile out(dest, named);
    out.write("abandoned");
    ASSERT_EQ(d.entries(), 2u);  // the hidden temporary file is visible while writing
    for (const auto& e : fs::directory_iterator(d.path)) {
      if (e.path() != dest) {
        EXPECT_EQ(e.path().filename().string().rfind(".out.bin.sluice-", 0), 0u) << e.path();
      }
    }
  }
  EXPECT_EQ(file_bytes(dest), "old");
  EXPECT_EQ(d.entries(), 1u);
  io::OutputFile out(dest, named);
  out.write("new");
  out.commit();
  EXPECT_EQ(file_bytes(dest), "new");
  EXPECT_EQ(d.entries(), 1u);
}

// ---- text inputs ----------------------------------------------------------------

TEST(TextInput, ReadsRegularFilesWhole) {
  Dir d;
  const std::string text = std::string(100000, 'a') + "\nend\n";
  EXPECT_EQ(io::read_text_input(d.file("p.txt", text), "-f"), text);
  EXPECT_EQ(io::read_text_input(d.file("empty.txt", ""), "-f"), "");
}

TEST(TextInput, RefusesNonRegularFilesAndFilesOverTheLimit) {
  Dir d;
  EXPECT_THAT(error_of([&] { io::read_text_input(d.path.string(), "-f"); }),
              AllOf(HasSubstr("-f " + d.path.string()), HasSubstr("is a directory")));
  EXPECT_THAT(error_of([] { io::read_text_input("/dev/zero", "-f"); }),
              AllOf(HasSubstr("-f /dev/zero"), HasSubstr("not a regular file")));
  EXPECT_THAT(error_of([] { io::read_text_input("/nonexistent/p.txt", "-f"); }),
              AllOf(HasSubstr("/nonexistent/p.txt"), HasSubstr("cannot open")));
  const std::string p = d.file("big.txt", std::string(1025, 'b'));
  EXPECT_EQ(io::read_text_input(p, "-f", 1025).size(), 1025u);
  EXPECT_THAT(error_of([&] { io::read_text_input(p, "-f", 1024); }),
              AllOf(HasSubstr("1025 bytes"), HasSubstr("above the 1024-byte limit")));
  EXPECT_EQ(io::kMaxTextInputBytes, uint64_t{64} << 20);
}

}  // namespace
}  // namespace sluice
