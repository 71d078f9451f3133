// util/proc_memory: MemAvailable from /proc/meminfo text, the cgroup memory
// limit and room from fake /proc and /sys text, VmHWM from /proc/self/status
// text; one live read of each on this machine.
#include "util/proc_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "test_support.h"
#include "util/error.h"

namespace sluice {
namespace SLUICE_TEST_FILE {

using sluice::test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

// ---- /proc/meminfo ----

constexpr const char* kMeminfo =
    "MemTotal:       32768000 kB\n"
    "MemFree:         1024000 kB\n"
    "MemAvailable:   16384000 kB\n"
    "Buffers:          102400 kB\n";

TEST(ProcMemory, MeminfoAvailable) {
  EXPECT_EQ(meminfo_available_bytes(kMeminfo), 16384000ull * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: 0 kB"), 0u);  // last line without a newline
  // Only the MemAvailable line counts, not MemFree or a lookalike prefix.
  EXPECT_EQ(meminfo_available_bytes("MemFree: 7 kB\nXMemAvailable: 9 kB\nMemAvailable: 3 kB\n"),
            3072u);
  EXPECT_THAT(error_of([] { meminfo_available_bytes("MemTotal: 5 kB\n"); }),
              AllOf(HasSubstr("/proc/meminfo"), HasSubstr("no MemAvailable line")));
  EXPECT_THAT(error_of([] { meminfo_available_bytes("MemAvailable: lots\n"); }),
              HasSubstr("/proc/meminfo: cannot parse 'MemAvailable: lots'"));
  EXPECT_THAT(error_of([] { meminfo_available_bytes("MemAvailable: 5 MB\n"); }),
              HasSubstr("cannot parse"));
  EXPECT_GT(meminfo_available_bytes(read_proc_meminfo()), 0u);  // this machine's
}

// ---- cgroup memory ----

// A fake file system for cgroup_memory.
TextFileReader fake_files(std::map<std::string, std::string> files) {
  return [files = std::move(files)](const std::string& path) -> std::optional<std::string> {
    const auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
}

constexpr const char* kV2Mounts =
    "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n";
constexpr const char* kHybridMounts =
    "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
    "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n"
    "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
    "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

TEST(ProcMemory, CgroupV2MaxVersusNumber) {
  // A number is a limit; the room is what memory.current leaves of it.
  CgroupMemory m = cgroup_memory("0::/a\n", kV2Mounts,
                                 fake_files({{"/sys/fs/cgroup/a/memory.max", "8589934592\n"},
                                             {"/sys/fs/cgroup/a/memory.current", "1073741824\n"}}));
  EXPECT_EQ(m.limit, std::optional<uint64_t>(8589934592ull));
  EXPECT_EQ(m.room, std::optional<uint64_t>(7516192768ull));
  // "max" is no limit, and then no room figure either.
  m = cgroup_memory("0::/a\n", kV2Mounts,
                    fake_files({{"/sys/fs/cgroup/a/memory.max", "max\n"},
                                {"/sys/fs/cgroup/a/memory.current", "5\n"}}));
  EXPECT_EQ(m.limit, std::nullopt);
  EXPECT_EQ(m.room, std::nullopt);
  // Usage at or above the limit leaves 0, not a wrapped-around huge number;
  // an unreadable usage counts as 0.
  m = cgroup_memory("0::/a\n", kV2Mounts,
                    fake_files({{"/sys/fs/cgroup/a/memory.max", "1000\n"},
                                {"/sys/fs/cgroup/a/memory.current", "1200\n"}}));
  EXPECT_EQ(m.room, std::optional<uint64_t>(0));
  m = cgroup_memory("0::/a\n", kV2Mounts, fake_files({{"/sys/fs/cgroup/a/memory.max", "1000\n"}}));
  EXPECT_EQ(m.room, std::optional<uint64_t>(1000));
}

TEST(ProcMemory, CgroupV2SmallestOnThePath) {
  // lowram.sh 8G under a parent limited to 16 GiB: the smaller wins.
  const auto read = fake_files({{"/sys/fs/cgroup/a/memory.max", "17179869184\n"},
                                {"/sys/fs/cgroup/a/sluice-lowram.1/memory.max", "8589934592\n"}});
  EXPECT_EQ(cgroup_memory("0::/a/sluice-lowram.1\n", kV2Mounts, read).limit,
            std::optional<uint64_t>(8589934592ull));
  // A parent limit below the child's also applies.
  const auto tight_parent = fake_files({{"/sys/fs/cgroup/a/memory.max", "1073741824\n"},
                                        {"/sys/fs/cgroup/a/b/memory.max", "max\n"}});
  EXPECT_EQ(cgroup_memory("0::/a/b\n", kV2Mounts, tight_parent).limit,
            std::optional<uint64_t>(1073741824ull));
  // The room is the tightest level's: the parent has the larger limit but
  // less left once its other children are counted.
  const auto busy_parent = fake_files({{"/sys/fs/cgroup/a/memory.max", "16000\n"},
                                       {"/sys/fs/cgroup/a/memory.current", "15000\n"},
                                       {"/sys/fs/cgroup/a/b/memory.max", "8000\n"},
                                       {"/sys/fs/cgroup/a/b/memory.current", "2000\n"}});
  const CgroupMemory m = cgroup_memory("0::/a/b\n", kV2Mounts, busy_parent);
  EXPECT_EQ(m.limit, std::optional<uint64_t>(8000));
  EXPECT_EQ(m.room, std::optional<uint64_t>(1000));
  // "max" all the way up: no cap.
  const auto unlimited = fake_files({{"/sys/fs/cgroup/a/memory.max", "max\n"}});
  EXPECT_EQ(cgroup_memory("0::/a\n", kV2Mounts, unlimited).limit, std::nullopt);
  // A container with its own cgroup mounted at the root and a host path in /proc/self/cgroup.
  const auto container = fake_files({{"/sys/fs/cgroup/memory.max", "4294967296\n"}});
  EXPECT_EQ(cgroup_memory("0::/docker/abc\n", kV2Mounts, container).limit,
            std::optional<uint64_t>(4294967296ull));
}

TEST(ProcMemory, CgroupV1MemoryHierarchy) {
  // A v1 memory controller beside a v2 mount without it (this project's VM).
  const std::string self =
      "9:name=systemd:/\n4:memory:/process_api/x/sluice-lowram.7\n1:cpu:/\n0::/\n";
  const auto capped = fake_files(
      {{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"},
       {"/sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes", "9223372036854771712\n"},
       {"/sys/fs/cgroup/memory/process_api/x/sluice-lowram.7/memory.limit_in_bytes",
        "4294967296\n"},
       {"/sys/fs/cgroup/memory/process_api/x/sluice-lowram.7/memory.usage_in_bytes",
        "294967296\n"}});
  const CgroupMemory m = cgroup_memory(self, kHybridMounts, capped);
  EXPECT_EQ(m.limit, std::optional<uint64_t>(4294967296ull));
  EXPECT_EQ(m.room, std::optional<uint64_t>(4000000000ull));
  // v1's "no limit" is a value near 2^63.
  const auto uncapped =
      fake_files({{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"}});
  EXPECT_EQ(cgroup_memory("4:memory:/process_api/x\n0::/\n", kHybridMounts, uncapped).limit,
            std::nullopt);
  // Controllers listed together ("cpu,memory") still count; garbage is no limit.
  const auto joint = fake_files({{"/sys/fs/cgroup/memory/g/memory.limit_in_bytes", "2147483648"},
                                 {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "lots"}});
  EXPECT_EQ(cgroup_memory("3:cpu,memory:/g\n",
                          "cgroup /sys/fs/cgroup/memory cgroup rw,cpu,memory 0 0\n", joint)
                .limit,
            std::optional<uint64_t>(2147483648ull));
  // No memory controller anywhere.
  const CgroupMemory none =
      cgroup_memory("1:cpu:/\n", "cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n", fake_files({}));
  EXPECT_EQ(none.limit, std::nullopt);
  EXPECT_EQ(none.room, std::nullopt);
}

TEST(ProcMemory, LiveCgroupIsConsistent) {
  const CgroupMemory m = process_cgroup_memory();
  EXPECT_EQ(m.limit.has_value(), m.room.has_value());
  if (m.limit) {
    EXPECT_LE(*m.room, *m.limit);
  }
}

// ---- peak RSS ----

TEST(ProcMemory, PeakRssFromStatus) {
  EXPECT_EQ(status_peak_rss_mib(
                "Name:\tsluice\nVmPeak:\t  99999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n"),
            std::optional<double>(2.0));
  EXPECT_EQ(status_peak_rss_mib("VmHWM:\t1536 kB"), std::optional<double>(1.5));
  EXPECT_EQ(status_peak_rss_mib("Name:\tkthreadd\nVmRSS:\t0 kB\n"),
            std::nullopt);  // kernel threads have none
  EXPECT_EQ(status_peak_rss_mib("VmHWM:\tlots\n"), std::nullopt);
  // This process: at least its current RSS, which holds this 64 MiB touched buffer.
  std::vector<char> touched(64u << 20, 1);
  EXPECT_GE(peak_rss_mib(), 64.0) << static_cast<int>(touched[12345]);
}

}  // namespace
}  // namespace sluice
