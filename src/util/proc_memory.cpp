#include "util/proc_memory.h"

#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "util/error.h"

namespace sluice {
namespace {

// v1 reports "unlimited" as PAGE_COUNTER_MAX pages in bytes (~2^63); anything
// this large is no limit on any real machine.
constexpr uint64_t kUnlimited = uint64_t{1} << 60;

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

bool has_word(const std::string& comma_list, const std::string& word) {
  return ("," + comma_list + ",").find("," + word + ",") != std::string::npos;
}

// The one whole number in a cgroup file's text; nullopt for "max" and
// anything unparsable.
std::optional<uint64_t> parse_count(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(word, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != word.size()) return std::nullopt;
  return static_cast<uint64_t>(v);
}

std::optional<uint64_t> parse_limit(const std::string& text) {
  const std::optional<uint64_t> v = parse_count(text);
  if (!v || *v == 0 || *v >= kUnlimited) return std::nullopt;
  return v;
}

struct Files {
  const char* limit;
  const char* usage;
};
constexpr Files kV2{"memory.max", "memory.current"};
constexpr Files kV1{"memory.limit_in_bytes", "memory.usage_in_bytes"};

// Folds the limits of `cgroup_path` and its ancestors under `mount` into `m`.
void walk_path(const std::string& mount, std::string cgroup_path, const Files& files,
               const TextFileReader& read, CgroupMemory& m) {
  while (true) {
    while (cgroup_path.size() > 1 && cgroup_path.back() == '/') cgroup_path.pop_back();
    const std::string dir = cgroup_path == "/" || cgroup_path.empty() ? mount : mount + cgroup_path;
    const std::optional<std::string> limit_text = read(dir + "/" + files.limit);
    if (const std::optional<uint64_t> limit =
            limit_text ? parse_limit(*limit_text) : std::nullopt) {
      const std::optional<std::string> usage_text = read(dir + "/" + files.usage);
      const uint64_t usage = usage_text ? parse_count(*usage_text).value_or(0) : 0;
      const uint64_t room = *limit > usage ? *limit - usage : 0;
      if (!m.limit || *limit < *m.limit) m.limit = limit;
      if (!m.room || room < *m.room) m.room = room;
    }
    if (cgroup_path.empty() || cgroup_path == "/") break;
    const size_t slash = cgroup_path.rfind('/');
    cgroup_path = slash == std::string::npos || slash == 0 ? "/" : cgroup_path.substr(0, slash);
  }
}

}  // namespace

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint64_t meminfo_available_bytes(std::string_view text) {
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    unsigned long long value = 0;
    std::string unit;
    if (!(fields >> value) || !(fields >> unit) || unit != "kB")
      throw Error("/proc/meminfo: cannot parse '" + line + "' (expected 'MemAvailable: N kB')");
    return static_cast<uint64_t>(value) * 1024;
  }
  throw Error("/proc/meminfo: no MemAvailable line (kernel older than 3.14?)");
}

std::string read_proc_meminfo() {
  std::optional<std::string> text = read_text_file("/proc/meminfo");
  if (!text) throw Error("/proc/meminfo: cannot open it");
  return std::move(*text);
}

CgroupMemory cgroup_memory(std::string_view proc_self_cgroup, std::string_view proc_mounts,
                           const TextFileReader& read) {
  std::vector<std::string> v2_mounts, v1_memory_mounts;
  for (const std::string& line : lines_of(proc_mounts)) {
    std::istringstream in(line);
    std::string dev, mnt, type, opts;
    if (!(in >> dev >> mnt >> type >> opts)) continue;
    if (type == "cgroup2") v2_mounts.push_back(mnt);
    if (type == "cgroup" && has_word(opts, "memory")) v1_memory_mounts.push_back(mnt);
  }
  CgroupMemory m;
  for (const std::string& line : lines_of(proc_self_cgroup)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? std::string::npos : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1),
                      path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      for (const std::string& mnt : v2_mounts) walk_path(mnt, path, kV2, read, m);
    } else if (has_word(controllers, "memory")) {
      for (const std::string& mnt : v1_memory_mounts) walk_path(mnt, path, kV1, read, m);
    }
  }
  return m;
}

CgroupMemory process_cgroup_memory() {
  const std::optional<std::string> cgroup = read_text_file("/proc/self/cgroup");
  const std::optional<std::string> mounts = read_text_file("/proc/mounts");
  if (!cgroup || !mounts) return {};
  return cgroup_memory(*cgroup, *mounts, read_text_file);
}

std::optional<double> status_peak_rss_mib(std::string_view status_text) {
  for (const std::string& line : lines_of(status_text)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream in(line.substr(6));
    double kib = 0;
    std::string unit;
    if (in >> kib >> unit && unit == "kB") return kib / 1024.0;
  }
  return std::nullopt;
}

double peak_rss_mib() {
  if (const std::optional<std::string> status = read_text_file("/proc/self/status"))
    if (const std::optional<double> mib = status_peak_rss_mib(*status)) return *mib;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

}  // namespace sluice
