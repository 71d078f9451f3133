// The machine conditions that move a benchmark's figures, read where the
// kernel exposes them, so every `sluice bench` run records them and says when
// one invalidates the run: CPU model, clock and governor; transparent huge
// pages (mode, and whether this process's memory got them); free memory and
// page cache before the run; load average.
//
// Each reader of a live file has a pure twin over the file's text, so tests
// pin the parsing on fixtures. An unreadable file leaves its field empty or
// zero ("unknown" in the summary line), never an error: a benchmark on a
// machine without /sys/devices/system/cpu/cpu0/cpufreq still runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

struct MachineConditions {
  std::string cpu_model;      // /proc/cpuinfo "model name" (x86) or "CPU part"/"Hardware" fallback
  int cpus = 0;               // processors listed in /proc/cpuinfo
  double cpu_mhz = 0;         // mean of /proc/cpuinfo "cpu MHz" (0: not reported)
  std::string governor;       // cpu0's scaling_governor ("" where there is no cpufreq)
  std::string thp_enabled;    // the selected mode in /sys/kernel/mm/transparent_hugepage/enabled
  std::string thp_defrag;     // ... and in .../defrag
  uint64_t mem_total = 0;     // /proc/meminfo MemTotal, bytes
  uint64_t mem_available = 0; // MemAvailable
  uint64_t page_cache = 0;    // Cached (file pages the page cache holds)
  double load1 = 0, load5 = 0, load15 = 0;
  uint64_t anon_huge_bytes = 0;  // this process's AnonHugePages (/proc/self/smaps_rollup)
};

// The bracketed choice in a THP sysfs file ("always [madvise] never" ->
// "madvise"); "" when there is none.
std::string thp_selected(std::string_view text);
// A "Key: N kB" field of /proc/meminfo or smaps_rollup, in bytes; 0 when absent.
uint64_t kb_field_bytes(std::string_view text, std::string_view key);
// Fills cpu_model, cpus and cpu_mhz from /proc/cpuinfo text.
void parse_cpuinfo(std::string_view text, MachineConditions& into);

// Reads everything now.
MachineConditions read_machine_conditions();

// One line for a log: "CPU <model> x<cpus> at <MHz> (governor <g>); THP
// enabled=<m> defrag=<d>; MemAvailable <GiB> of <GiB>, page cache <GiB>;
// load <1> <5> <15>".
std::string describe(const MachineConditions& c);

// The states that make a run's figures unrepresentative, one sentence each:
// a busy machine (1-minute load above half the CPUs), a powersave governor,
// less memory available than `working_set_bytes` (the run will page; 0 skips
// this check).
std::vector<std::string> condition_warnings(const MachineConditions& c, uint64_t working_set_bytes);

}  // namespace sluice
