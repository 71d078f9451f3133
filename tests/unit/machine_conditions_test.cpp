// util/machine_conditions: the parsers on fixtures taken from real machines,
// the summary line, and the warnings that mark a run unrepresentative.
#include <gtest/gtest.h>

#include "test_support.h"
#include "util/machine_conditions.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

constexpr const char* kCpuinfoX86 =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n"
    "cpu MHz\t\t: 2600.000\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9R14 96-Core Processor\ncpu MHz\t\t: 3700.500\n";
constexpr const char* kCpuinfoArm =
    "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n\n"
    "processor\t: 1\nCPU part\t: 0xd0c\n";

TEST(MachineConditions, CpuinfoGivesModelCountAndMeanClock) {
  MachineConditions c;
  parse_cpuinfo(kCpuinfoX86, c);
  EXPECT_EQ(c.cpu_model, "AMD EPYC 9R14 96-Core Processor");
  EXPECT_EQ(c.cpus, 2);
  EXPECT_DOUBLE_EQ(c.cpu_mhz, 3150.25);
  MachineConditions a;
  parse_cpuinfo(kCpuinfoArm, a);
  EXPECT_EQ(a.cpu_model, "ARM CPU part 0xd0c");
  EXPECT_EQ(a.cpus, 2);
  EXPECT_DOUBLE_EQ(a.cpu_mhz, 0.0);
}

TEST(MachineConditions, ThpSelectionAndKbFields) {
  EXPECT_EQ(thp_selected("always [madvise] never\n"), "madvise");
  EXPECT_EQ(thp_selected("[always] defer defer+madvise madvise never\n"), "always");
  EXPECT_EQ(thp_selected("always madvise never\n"), "");
  const char* meminfo = "MemTotal:       24581232 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n"
                        "Cached:          1048576 kB\nSwapCached:  7 kB\n";
  EXPECT_EQ(kb_field_bytes(meminfo, "MemTotal"), 24581232ull * 1024);
  EXPECT_EQ(kb_field_bytes(meminfo, "Cached"), 1048576ull * 1024);  // not SwapCached
  EXPECT_EQ(kb_field_bytes(meminfo, "AnonHugePages"), 0u);
  EXPECT_EQ(kb_field_bytes("AnonHugePages:  4096 kB\n", "AnonHugePages"), 4096ull * 1024);
}

TEST(MachineConditions, DescribeNamesUnknownsAndWarningsSayWhy) {
  MachineConditions c;
  c.cpu_model = "X";
  c.cpus = 2;
  c.mem_total = 24ull << 30;
  c.mem_available = 8ull << 30;
  c.load1 = 3.5;
  EXPECT_EQ(describe(c),
            "CPU X x2 at unknown MHz (governor unknown); THP enabled=unknown defrag=unknown; MemAvailable 8.0 GiB of "
            "24.0 GiB, page cache 0.0 GiB; load 3.50 0.00 0.00");
  const auto w = condition_warnings(c, 16ull << 30);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("busy (1-minute load 3.50 on 2 CPUs)"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("below the run's working set (16.0 GiB)"), std::string::npos) << w[1];
  c.load1 = 0.5;
  c.governor = "powersave";
  const auto p = condition_warnings(c, 0);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("powersave"), std::string::npos);
}

TEST(MachineConditions, BenchPrintsTheLineOfThisMachine) {
  const CliResult r = run_sluice("bench --conditions", "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("CPU ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("; THP enabled="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; load "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sluice::test
