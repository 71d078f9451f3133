// io helpers owned by the weight stores: aligned buffers, residency/advice,
// the retrying read loop, FdFile and FaultFile.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "io/aligned_buffer.h"
#include "io/direct_reader.h"
#include "io/fault_file.h"
#include "io/file.h"
#include "io/residency.h"
#include "util/error.h"
#include "test_support.h"

namespace sluice::io {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

using sluice::test::error_of;

// A file in the working directory (the build dir: a real disk) with bytes b[k] = k*7+3.
struct TestFile {
  explicit TestFile(size_t n, const std::string& name) {
    path = (fs::current_path() / ("residency_test_" + std::to_string(::getpid()) + "_" + name)).string();
    bytes.resize(n);
    for (size_t k = 0; k < n; ++k) bytes[k] = static_cast<uint8_t>(k * 7 + 3);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(n));
  }
  ~TestFile() { fs::remove(path); }
  std::string path;
  std::vector<uint8_t> bytes;
};

TEST(AlignedBuffer, AlignedZeroedAndGrowsOnlyWhenNeeded) {
  AlignedBuffer b(5000);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kIoAlign, 0u);
  EXPECT_EQ(b.size(), 8192u);  // rounded up to 4 KiB
  EXPECT_EQ(std::count(b.data(), b.data() + b.size(), 0), 8192);
  b.data()[0] = 42;
  uint8_t* before = b.data();
  b.ensure(8192);  // fits: same memory, contents kept
  EXPECT_EQ(b.data(), before);
  EXPECT_EQ(b.data()[0], 42);
  b.ensure(8193);
  EXPECT_EQ(b.size(), 12288u);
  AlignedBuffer moved = std::move(b);
  EXPECT_EQ(moved.size(), 12288u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(AlignedBuffer(0).data(), nullptr);
  EXPECT_EQ(align_up(1), 4096u);
  EXPECT_EQ(align_up(4096), 4096u);
  EXPECT_EQ(align_down(8191), 4096u);
}

TEST(Residency, AnonymousPagesCountOnlyOnceTouched) {
  const size_t ps = page_size();
  AlignedBuffer b(16 * ps);
  EXPECT_EQ(residency(b.data(), b.size()).total_pages, 16u);
  EXPECT_DOUBLE_EQ(resident_fraction(b.data(), b.size()), 0.0);  // never touched
  std::memset(b.data(), 1, 4 * ps);
  EXPECT_EQ(residency(b.data(), b.size()).resident_pages, 4u);
  std::memset(b.data(), 1, b.size());
  EXPECT_DOUBLE_EQ(resident_fraction(b.data(), b.size()), 1.0);
  ASSERT_TRUE(advise_dontneed(b.data(), b.size()));  // private anonymous: pages freed
  EXPECT_DOUBLE_EQ(resident_fraction(b.data(), b.size()), 0.0);
  EXPECT_EQ(b.data()[0], 0);  // and read back as zero
  EXPECT_DOUBLE_EQ(resident_fraction(b.data(), 0), 1.0);
  // An unaligned range counts the pages it touches.
  EXPECT_EQ(residency(b.data() + ps - 1, 2).total_pages, 2u);
}

TEST(Residency, WarmMappingAndDroppedFilePages) {
  TestFile f(64 * 4096, "warm");
  const int fd = ::open(f.path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fsync(fd);
  void* p = ::mmap(nullptr, f.bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  uint64_t want = 0;
  // touch_pages reads the first byte, each later page start, and the last byte.
  for (size_t off = page_size(); off < f.bytes.size(); off += page_size()) want += f.bytes[off];
  want += f.bytes[0] + f.bytes.back();
  advise_willneed(p, f.bytes.size());
  EXPECT_EQ(touch_pages(p, f.bytes.size()), want);  // reads the file's bytes
  EXPECT_DOUBLE_EQ(resident_fraction(p, f.bytes.size()), 1.0);
  ::munmap(p, f.bytes.size());
  // Unmapped, clean and synced: DONTNEED really drops them from the cache.
  ASSERT_TRUE(drop_file_pages(fd));
  void* q = ::mmap(nullptr, f.bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(q, MAP_FAILED);
  EXPECT_LT(resident_fraction(q, f.bytes.size()), 0.5);
  ::munmap(q, f.bytes.size());
  ::close(fd);
  EXPECT_TRUE(drop_file_pages(f.path));
  EXPECT_FALSE(drop_file_pages(f.path + ".missing"));
  EXPECT_FALSE(drop_file_pages(-1));
}

// A raw reader over a byte vector that misbehaves on a script.
TEST(ReadFully, RetriesShortReadsAndEintr) {
  std::vector<uint8_t> src(1000);
  std::iota(src.begin(), src.end(), 0);
  int calls = 0;
  RawPread raw = [&](void* d, size_t n, uint64_t off) -> ssize_t {
    ++calls;
    if (calls % 2 == 0) return -EINTR;
    const size_t k = std::min<size_t>({n, 7, src.size() - off});
    std::memcpy(d, src.data() + off, k);
    return static_cast<ssize_t>(k);
  };
  std::vector<uint8_t> out(500);
  read_fully(raw, "f.bin", out.data(), out.size(), 100);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), src.begin() + 100));
  EXPECT_GT(calls, 140);  // 72 short reads with an EINTR between each
}

TEST(ReadFully, ErrorsNameFileOffsetAndCause) {
  std::vector<uint8_t> out(64);
  RawPread eio = [](void*, size_t, uint64_t) -> ssize_t { return -EIO; };
  EXPECT_THAT(error_of([&] { read_fully(eio, "m.gguf", out.data(), 64, 4096); }),
              AllOf(HasSubstr("m.gguf"), HasSubstr("64 bytes at offset 4096"),
                    HasSubstr("Input/output error")));
  RawPread eof = [](void* d, size_t n, uint64_t off) -> ssize_t {
    return off >= 10 ? 0 : static_cast<ssize_t>(std::min<uint64_t>(n, 10 - off));
  };
  EXPECT_THAT(error_of([&] { read_fully(eof, "m.gguf", out.data(), 64, 0); }),
              HasSubstr("unexpected end of file after 10 bytes"));
  RawPread forever = [](void*, size_t, uint64_t) -> ssize_t { return -EINTR; };
  EXPECT_THAT(error_of([&] { read_fully(forever, "m.gguf", out.data(), 64, 0); }),
              HasSubstr("Interrupted system call"));
}

TEST(ReadFully, ReadOnceRetriesInterruptionsABoundedNumberOfTimes) {
  // read_once is what the O_DIRECT probe uses: EINTR/EAGAIN are retried, but
  // a source that never stops failing that way gives up.
  int calls = 0;
  RawPread flaky = [&](void* d, size_t n, uint64_t) -> ssize_t {
    if (++calls <= 5) return calls % 2 ? -EINTR : -EAGAIN;
    std::memset(d, 7, n);
    return static_cast<ssize_t>(n);
  };
  uint8_t b[16] = {};
  EXPECT_EQ(read_once(flaky, b, 16, 0), 16);
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(b[15], 7);
  calls = 0;
  RawPread forever = [&](void*, size_t, uint64_t) -> ssize_t {
    ++calls;
    return -EINTR;
  };
  EXPECT_EQ(read_once(forever, b, 16, 0), -EINTR);
  EXPECT_EQ(calls, kMaxInterrupts + 1);
  RawPread eio = [](void*, size_t, uint64_t) -> ssize_t { return -EIO; };
  EXPECT_EQ(read_once(eio, b, 16, 0), -EIO);  // other errors are not retried
}

TEST(FdFile, BufferedAndDirectReadTheFileBytes) {
  TestFile f(3 * 4096 + 100, "fd");
  auto buffered = open_fd_file(f.path, false);
  ASSERT_NE(buffered, nullptr);
  EXPECT_FALSE(buffered->direct());
  EXPECT_EQ(buffered->size(), f.bytes.size());
  std::vector<uint8_t> out(333);
  buffered->read_exact(out.data(), out.size(), 4000);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), f.bytes.begin() + 4000));
  EXPECT_THAT(error_of([&] { buffered->read_exact(out.data(), 200, f.bytes.size() - 100); }),
              AllOf(HasSubstr(f.path), HasSubstr("past end of file")));
  auto direct = open_fd_file(f.path, true);
  if (direct == nullptr) GTEST_SKIP() << "O_DIRECT refused in " << fs::current_path();
  EXPECT_TRUE(direct->direct());
  AlignedBuffer b(2 * 4096);
  direct->read_exact(b.data(), 2 * 4096, 4096);
  EXPECT_TRUE(std::equal(b.data(), b.data() + 2 * 4096, f.bytes.begin() + 4096));
}

TEST(FdFile, OpenErrorsNameThePath) {
  EXPECT_THAT(error_of([] { open_fd_file("/nonexistent/x.gguf", false); }),
              AllOf(HasSubstr("/nonexistent/x.gguf"), HasSubstr("cannot open")));
  EXPECT_THAT(error_of([] { open_fd_file("/nonexistent/x.gguf", true); }), HasSubstr("cannot open"));
  EXPECT_THAT(error_of([] { open_fd_file("/", false); }), HasSubstr("not a regular file"));
}

TEST(FaultFile, FailsTheNthReadAndCountsCalls) {
  std::vector<uint8_t> bytes(100, 9);
  std::shared_ptr<const File> mem = memory_file("mem.bin", bytes);
  FaultPlan plan;
  plan.fail_read = 2;
  FaultFile ff(mem, plan);
  uint8_t out[10];
  ff.read_exact(out, 10, 0);
  EXPECT_THAT(error_of([&] { ff.read_exact(out, 10, 50); }),
              AllOf(HasSubstr("mem.bin"), HasSubstr("offset 50"), HasSubstr("Input/output error")));
  ff.read_exact(out, 10, 0);  // only the 2nd call fails
  EXPECT_EQ(ff.calls(), 3u);
  plan.fail_every_after = true;
  FaultFile sticky(mem, plan);
  sticky.read_exact(out, 10, 0);
  EXPECT_THAT(error_of([&] { sticky.read_exact(out, 10, 0); }), HasSubstr("Input/output error"));
  EXPECT_THAT(error_of([&] { sticky.read_exact(out, 10, 0); }), HasSubstr("Input/output error"));
}

}  // namespace
}  // namespace sluice::io
