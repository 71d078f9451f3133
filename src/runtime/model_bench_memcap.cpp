// model_bench — the memory cap a process runs under (mem_cap_MiB), so that
// bench rows from runs under scripts/lowram.sh say which cap they ran under.
//
// cgroup v2: /proc/self/cgroup has a line "0::/PATH" and the limit is
// memory.max ("max" = none) in PATH and its ancestors under the cgroup2 mount.
// cgroup v1: a line "N:...memory...:/PATH" and memory.limit_in_bytes under the
// memory hierarchy's mount (the kernel's "no limit" is a value near 2^63).
// A process is bounded by every ancestor's limit, so the cap is the smallest
// found walking up to the mount point.
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/model_bench.h"

namespace sluice::runtime {
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

// The limit in a memory.max / memory.limit_in_bytes text; nullopt for "max",
// unlimited values and anything unparsable.
std::optional<uint64_t> parse_limit(const std::string& text) {
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
  if (used != word.size() || v == 0 || v >= kUnlimited) return std::nullopt;
  return static_cast<uint64_t>(v);
}

// Smallest limit in `file` of `cgroup_path` and its ancestors under `mount`.
std::optional<uint64_t> smallest_on_path(const std::string& mount, std::string cgroup_path, const std::string& file,
                                         const TextFileReader& read) {
  std::optional<uint64_t> best;
  while (true) {
    while (cgroup_path.size() > 1 && cgroup_path.back() == '/') cgroup_path.pop_back();
    const std::string dir = cgroup_path == "/" || cgroup_path.empty() ? mount : mount + cgroup_path;
    if (const std::optional<std::string> text = read(dir + "/" + file)) {
      const std::optional<uint64_t> v = parse_limit(*text);
      if (v && (!best || *v < *best)) best = v;
    }
    if (cgroup_path.empty() || cgroup_path == "/") break;
    const size_t slash = cgroup_path.rfind('/');
    cgroup_path = slash == std::string::npos || slash == 0 ? "/" : cgroup_path.substr(0, slash);
  }
  return best;
}

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<uint64_t> memory_cap_bytes(std::string_view proc_self_cgroup, std::string_view proc_mounts,
                                         const TextFileReader& read) {
  std::vector<std::string> v2_mounts, v1_memory_mounts;
  for (const std::string& line : lines_of(proc_mounts)) {
    std::istringstream in(line);
    std::string dev, mnt, type, opts;
    if (!(in >> dev >> mnt >> type >> opts)) continue;
    if (type == "cgroup2") v2_mounts.push_back(mnt);
    if (type == "cgroup" && has_word(opts, "memory")) v1_memory_mounts.push_back(mnt);
  }
  std::optional<uint64_t> cap;
  const auto take = [&cap](std::optional<uint64_t> v) {
    if (v && (!cap || *v < *cap)) cap = v;
  };
  for (const std::string& line : lines_of(proc_self_cgroup)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? std::string::npos : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      for (const std::string& m : v2_mounts) take(smallest_on_path(m, path, "memory.max", read));
    } else if (has_word(controllers, "memory")) {
      for (const std::string& m : v1_memory_mounts) take(smallest_on_path(m, path, "memory.limit_in_bytes", read));
    }
  }
  return cap;
}

std::optional<uint64_t> process_memory_cap_bytes() {
  const std::optional<std::string> cgroup = read_text_file("/proc/self/cgroup");
  const std::optional<std::string> mounts = read_text_file("/proc/mounts");
  if (!cgroup || !mounts) return std::nullopt;
  return memory_cap_bytes(*cgroup, *mounts, read_text_file);
}

}  // namespace sluice::runtime
