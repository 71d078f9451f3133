#include <gtest/gtest.h>
#include <gmock/gmock.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "io/fault_file.h"
#include "io/file.h"
#include "io/whole_file.h"
#include "util/error.h"
#include "test_support.h"

namespace sluice::io {
namespace SLUICE_TEST_FILE {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("sluice_io_" + std::to_string(::getpid()) + "_" + name);
}

using sluice::test::error_of;

TEST(IoFile, ReadsExactBytesAtOffsets) {
  const auto p = temp_path("read.bin");
  std::vector<uint8_t> bytes(10000);
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 7 + 3);
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto f = open_file(p.string());
  EXPECT_EQ(f->path(), p.string());
  EXPECT_EQ(f->size(), 10000u);
  std::vector<uint8_t> got(100);
  f->read_exact(got.data(), got.size(), 4321);
  EXPECT_EQ(got, std::vector<uint8_t>(bytes.begin() + 4321, bytes.begin() + 4421));
  f->read_exact(got.data(), 0, 10000);  // empty read at EOF is fine
  std::filesystem::remove(p);
}

TEST(IoFile, ReadPastEndNamesPathAndOffset) {
  const auto p = temp_path("short.bin");
  std::ofstream(p, std::ios::binary) << "0123456789";
  auto f = open_file(p.string());
  char buf[8];
  EXPECT_THAT(error_of([&] { f->read_exact(buf, 8, 5); }),
              AllOf(HasSubstr(p.string()), HasSubstr("offset 5"), HasSubstr("end of file")));
  std::filesystem::remove(p);
}

TEST(IoFile, OpenErrorsNameThePath) {
  EXPECT_THAT(error_of([] { open_file("/nonexistent/dir/x.gguf"); }),
              AllOf(HasSubstr("/nonexistent/dir/x.gguf"), HasSubstr("cannot open")));
  EXPECT_THAT(error_of([] { open_file(std::filesystem::temp_directory_path().string()); }),
              HasSubstr("not a regular file"));
}

TEST(IoFile, DirectReadsRequireAlignment) {
  const auto p = temp_path("direct.bin");
  std::vector<char> bytes(8192, 'x');
  std::ofstream(p, std::ios::binary).write(bytes.data(), bytes.size());
  std::unique_ptr<File> f;
  try {
    f = open_file(p.string(), OpenOptions{.direct = true});
  } catch (const Error& e) {
    std::filesystem::remove(p);
    GTEST_SKIP() << "O_DIRECT unsupported here: " << e.what();
  }
  alignas(4096) static char buf[4096];
  f->read_exact(buf, 4096, 4096);
  EXPECT_EQ(buf[0], 'x');
  EXPECT_THAT(error_of([&] { f->read_exact(buf, 100, 0); }), HasSubstr("aligned"));
  std::filesystem::remove(p);
}

TEST(IoMemoryFile, BoundsAreChecked) {
  auto f = memory_file("mem", {1, 2, 3, 4});
  EXPECT_EQ(f->size(), 4u);
  uint8_t b[2];
  f->read_exact(b, 2, 2);
  EXPECT_EQ(b[0], 3);
  EXPECT_EQ(b[1], 4);
  EXPECT_THAT(error_of([&] { f->read_exact(b, 2, 3); }), AllOf(HasSubstr("mem"), HasSubstr("offset 3")));
  EXPECT_THROW(f->read_exact(b, 1, UINT64_MAX), Error);
  EXPECT_THROW(f->read_exact(b, SIZE_MAX, 1), Error);
}

// A WrapFile that puts the file in a FaultFile with `plan`.
WrapFile faulty(const FaultPlan& plan) {
  return [plan](std::shared_ptr<const File> f) -> std::shared_ptr<const File> {
    return std::make_shared<FaultFile>(std::move(f), plan);
  };
}

TEST(WholeFile, ReadsEveryByteThroughShortReadsAndEintr) {
  const auto p = temp_path("whole.txt");
  const std::string text = "Once upon a time\nthere was a prompt.\n";
  std::ofstream(p, std::ios::binary) << text;
  EXPECT_EQ(read_whole_file(p.string(), 1000), text);
  FaultPlan plan;
  plan.max_bytes_per_raw = 5;
  plan.eintr_every = 2;
  EXPECT_EQ(read_whole_file(p.string(), 1000, faulty(plan)), text);
  std::filesystem::remove(p);
}

TEST(WholeFile, FaultsAndLimitsAreErrorsNamingTheFile) {
  const auto p = temp_path("whole-faults.txt");
  std::ofstream(p, std::ios::binary) << std::string(100, 'x');
  FaultPlan eio;
  eio.fail_read = 1;
  EXPECT_THAT(error_of([&] { read_whole_file(p.string(), 1000, faulty(eio)); }),
              AllOf(HasSubstr(p.string()), HasSubstr("Input/output error")));
  FaultPlan eof;
  eof.eof_at = 40;  // the file shrank after it was opened
  EXPECT_THAT(error_of([&] { read_whole_file(p.string(), 1000, faulty(eof)); }),
              AllOf(HasSubstr(p.string()), HasSubstr("unexpected end of file after 40 bytes")));
  FaultPlan storm;
  storm.eintr_every = 1;
  EXPECT_THAT(error_of([&] { read_whole_file(p.string(), 1000, faulty(storm)); }),
              AllOf(HasSubstr(p.string()), HasSubstr("Interrupted system call")));
  EXPECT_THAT(error_of([&] { read_whole_file(p.string(), 99); }),
              AllOf(HasSubstr(p.string()), HasSubstr("100 bytes, more than the 99")));
  EXPECT_THAT(error_of([&] { read_whole_file(p.string() + ".missing", 99); }),
              AllOf(HasSubstr(".missing"), HasSubstr("cannot open")));
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace sluice::io
