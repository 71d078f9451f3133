// What the kernel says about memory, parsed once for every caller:
// MemAvailable from /proc/meminfo, the cgroup memory limit and the room left
// under it, and the process's peak RSS.
//
// Each reader of a live file has a pure twin that takes the file's text (and,
// for cgroups, a file reader), so tests pin the parsing on fixtures.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

// The whole text of a (small, /proc or /sys) file; nullopt when it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);

// ---- /proc/meminfo ----

// MemAvailable in bytes from /proc/meminfo text ("MemAvailable: N kB").
// Throws Error naming /proc/meminfo when the line is absent or malformed.
uint64_t meminfo_available_bytes(std::string_view meminfo_text);
std::string read_proc_meminfo();  // throws Error naming /proc/meminfo

// ---- cgroup memory ----

// The text of a file, or nullopt when it cannot be read (tests pass a fake).
using TextFileReader = std::function<std::optional<std::string>(const std::string& path)>;

struct CgroupMemory {
  // The smallest limit on the process's cgroup path: cgroup v2 memory.max
  // ("max" = none) or v1 memory.limit_in_bytes (~2^63 = none), in the
  // process's cgroup and every ancestor up to the hierarchy's mount point, as
  // each of them bounds it. nullopt: no limit.
  std::optional<uint64_t> limit;
  // What is left: the smallest (limit - usage) over the limited cgroups on
  // the path (usage: v2 memory.current, v1 memory.usage_in_bytes; 0 when
  // unreadable), never below 0. nullopt exactly when limit is.
  std::optional<uint64_t> room;
};

// From the text of /proc/self/cgroup ("ID:CONTROLLERS:PATH" lines; v2 is
// "0::PATH") and /proc/mounts (cgroup2 mounts, and cgroup mounts whose options
// name memory), reading the limit files through `read`.
CgroupMemory cgroup_memory(std::string_view proc_self_cgroup, std::string_view proc_mounts,
                           const TextFileReader& read);
CgroupMemory process_cgroup_memory();  // this process's; no limit when /proc cannot be read

// ---- peak RSS ----

// VmHWM from /proc/self/status text, in MiB (the kernel reports kB); nullopt
// when there is no VmHWM line.
std::optional<double> status_peak_rss_mib(std::string_view status_text);
// This process's peak RSS in MiB: VmHWM (which reset_peak_rss lowers to the
// current RSS), or getrusage's ru_maxrss where /proc/self/status lacks it.
double peak_rss_mib();
// Resets VmHWM by writing 5 to /proc/self/clear_refs (Linux >= 4.0), so a
// later peak_rss_mib() is the peak since now. False when that failed.
bool reset_peak_rss();

}  // namespace sluice
