#include "util/machine_conditions.h"

#include <cstdio>
#include <sstream>

#include "util/proc_memory.h"

namespace sluice {
namespace {

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The value after "key<spaces>:" on a /proc/cpuinfo line, or nullopt-like "".
bool cpuinfo_value(const std::string& line, std::string_view key, std::string& value) {
  if (line.rfind(key, 0) != 0) return false;
  const size_t colon = line.find(':');
  if (colon == std::string::npos || trim(line.substr(key.size(), colon - key.size())) != "") return false;
  value = trim(line.substr(colon + 1));
  return true;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

std::string thp_selected(std::string_view text) {
  const size_t open = text.find('[');
  const size_t close = open == std::string_view::npos ? open : text.find(']', open);
  if (close == std::string_view::npos) return "";
  return std::string(text.substr(open + 1, close - open - 1));
}

uint64_t kb_field_bytes(std::string_view text, std::string_view key) {
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != ':') continue;
    std::istringstream fields(line.substr(key.size() + 1));
    unsigned long long kb = 0;
    std::string unit;
    if (fields >> kb >> unit && unit == "kB") return static_cast<uint64_t>(kb) * 1024;
    return 0;
  }
  return 0;
}

void parse_cpuinfo(std::string_view text, MachineConditions& into) {
  std::istringstream in{std::string(text)};
  std::string line, value, part;
  double mhz_sum = 0;
  int mhz_n = 0;
  into.cpus = 0;
  while (std::getline(in, line)) {
    if (cpuinfo_value(line, "processor", value)) ++into.cpus;
    if (into.cpu_model.empty() && cpuinfo_value(line, "model name", value)) into.cpu_model = value;
    if (part.empty() && cpuinfo_value(line, "CPU part", value)) part = value;
    if (cpuinfo_value(line, "cpu MHz", value)) {
      try {
        mhz_sum += std::stod(value);
        ++mhz_n;
      } catch (...) {  // an unparsable clock is an unknown clock
      }
    }
  }
  if (into.cpu_model.empty() && !part.empty()) into.cpu_model = "ARM CPU part " + part;
  into.cpu_mhz = mhz_n ? mhz_sum / mhz_n : 0;
}

MachineConditions read_machine_conditions() {
  MachineConditions c;
  if (auto t = read_text_file("/proc/cpuinfo")) parse_cpuinfo(*t, c);
  if (auto t = read_text_file("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")) c.governor = trim(*t);
  if (auto t = read_text_file("/sys/kernel/mm/transparent_hugepage/enabled")) c.thp_enabled = thp_selected(*t);
  if (auto t = read_text_file("/sys/kernel/mm/transparent_hugepage/defrag")) c.thp_defrag = thp_selected(*t);
  if (auto t = read_text_file("/proc/meminfo")) {
    c.mem_total = kb_field_bytes(*t, "MemTotal");
    c.mem_available = kb_field_bytes(*t, "MemAvailable");
    c.page_cache = kb_field_bytes(*t, "Cached");
  }
  if (auto t = read_text_file("/proc/loadavg")) {
    std::istringstream in(*t);
    in >> c.load1 >> c.load5 >> c.load15;
  }
  if (auto t = read_text_file("/proc/self/smaps_rollup")) c.anon_huge_bytes = kb_field_bytes(*t, "AnonHugePages");
  return c;
}

std::string describe(const MachineConditions& c) {
  const auto known = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
  char buf[512];
  std::snprintf(buf, sizeof buf, "CPU %s x%d at %s (governor %s); THP enabled=%s defrag=%s; MemAvailable %s of %s, "
                "page cache %s; load %.2f %.2f %.2f",
                known(c.cpu_model).c_str(), c.cpus,
                c.cpu_mhz > 0 ? (std::to_string(static_cast<int>(c.cpu_mhz + 0.5)) + " MHz").c_str() : "unknown MHz",
                known(c.governor).c_str(), known(c.thp_enabled).c_str(), known(c.thp_defrag).c_str(),
                gib(c.mem_available).c_str(), gib(c.mem_total).c_str(), gib(c.page_cache).c_str(), c.load1, c.load5,
                c.load15);
  return buf;
}

std::vector<std::string> condition_warnings(const MachineConditions& c, uint64_t working_set_bytes) {
  std::vector<std::string> w;
  char buf[256];
  if (c.cpus > 0 && c.load1 > 0.5 * c.cpus) {
    std::snprintf(buf, sizeof buf,
                  "the machine is busy (1-minute load %.2f on %d CPUs): figures will be low and noisy", c.load1,
                  c.cpus);
    w.emplace_back(buf);
  }
  if (c.governor == "powersave")
    w.emplace_back("the CPU frequency governor is powersave: clocks may be held low (performance or schedutil "
                   "gives representative figures)");
  if (working_set_bytes > 0 && c.mem_available > 0 && c.mem_available < working_set_bytes)
    w.emplace_back("MemAvailable (" + gib(c.mem_available) + ") is below the run's working set (" +
                   gib(working_set_bytes) + "): it will page, and measure the disk rather than the engine");
  return w;
}

}  // namespace sluice
