// io_bench — flag parsing (sizes, lane lists) and output (markdown, JSON, CSV).
//
// Numbers are rounded to fixed precision (GB/s 4 decimals, IOPS 1, latency 2)
// so the JSON and CSV forms are stable and easy to diff; JSON is written by
// nlohmann-json, CSV rows by util/csv.h.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/flag_list.h"
#include "bench/io_bench.h"
#include "util/csv.h"
#include "util/decimal.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::bench {
namespace {

constexpr uint64_t kMaxSize = 1ull << 40;  // 1 TiB: far past any sane read, far below overflow

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

uint64_t parse_size(std::string_view text, const std::string& flag) {
  const std::string_view s = trim(text);
  const std::string bad = flag + ": '" + std::string(text) +
                          "' is not a size (use bytes or a K/M/G suffix, e.g. 4096, 4K, 2.5M, 1G)";
  size_t i = 0;
  bool seen_digit = false, seen_dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      seen_digit = true;
    } else if (c == '.' && !seen_dot) {
      seen_dot = true;
    } else {
      break;
    }
  }
  if (!seen_digit) throw Error(bad);
  const std::string number(s.substr(0, i));
  const std::string suffix = upper(trim(s.substr(i)));
  uint64_t mult = 0;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") mult = 1ull << 30;
  else throw Error(bad);
  if (number.size() > 24) throw Error(bad);  // keeps the conversion below exact enough and finite
  const long double value = std::stold(number) * static_cast<long double>(mult);
  const long double rounded = std::round(value);
  if (rounded < 1) fail(flag, "size '" + std::string(text) + "' must be at least 1 byte");
  if (rounded > static_cast<long double>(kMaxSize)) {
    fail(flag, "size '" + std::string(text) + "' is too large (at most 1 TiB)");
  }
  return static_cast<uint64_t>(rounded);
}

std::vector<uint64_t> parse_size_list(std::string_view csv, const std::string& flag) {
  std::vector<uint64_t> out;
  for (const std::string& part : split_flag_list(csv, flag)) out.push_back(parse_size(part, flag));
  return out;
}

std::vector<int> parse_lane_list(std::string_view csv, const std::string& flag) {
  std::vector<int> out;
  for (const std::string& part : split_flag_list(csv, flag)) {
    const bool digits = std::all_of(part.begin(), part.end(),
                                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (!digits || part.size() > 9) {
      fail(flag, "'" + std::string(part) + "' is not a lane count (a whole number 1.." +
                     std::to_string(kMaxIoBenchLanes) + ")");
    }
    const int n = std::stoi(std::string(part));
    if (n < 1 || n > kMaxIoBenchLanes) {
      fail(flag, "lane count " + std::to_string(n) + " is out of range (1.." + std::to_string(kMaxIoBenchLanes) + ")");
    }
    out.push_back(n);
  }
  return out;
}

std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = double(bytes);
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  std::string num = (v == std::floor(v)) ? fixed(v, 0) : fixed(v, 2);
  return num + " " + kUnits[u];
}

std::string format_io_markdown(const std::vector<IoBenchRow>& rows, const std::vector<std::string>& notes) {
  std::string out;
  out += "| mode | size | size_bytes | lanes | GB/s | IOPS | lat mean us | lat p50 us | lat p99 us | engine |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const IoBenchRow& r : rows) {
    out += "| " + std::string(io_mode_name(r.mode)) + " | " + format_size(r.size_bytes) + " | " +
           std::to_string(r.size_bytes) + " | " + std::to_string(r.lanes) + " | " + fixed(r.GBps, 3) +
           " | " + fixed(r.iops, 0) + " | " + fixed(r.lat_us_mean, 1) + " | " + fixed(r.lat_us_p50, 1) +
           " | " + fixed(r.lat_us_p99, 1) + " | " + io::io_engine_name(r.engine) + " |\n";
  }
  const std::vector<IoBenchRow> best = best_rows(rows);
  if (!best.empty()) out += "\n";
  for (const IoBenchRow& b : best) {
    const bool uring = b.engine == io::IoEngine::Uring;
    out += "best " + std::string(io_mode_name(b.mode)) + (uring ? " uring " : " ") + format_size(b.size_bytes) +
           ": " + std::to_string(b.lanes) +
           (uring ? " in flight, " : (b.lanes == 1 ? " lane, " : " lanes, ")) + fixed(b.GBps, 3) + " GB/s\n";
  }
  if (!notes.empty()) out += "\n";
  for (const std::string& n : notes) out += "> note: " + n + "\n";
  return out;
}

std::string format_io_json(const std::vector<IoBenchRow>& rows) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const IoBenchRow& r : rows) {
    nlohmann::ordered_json o;
    o["mode"] = std::string(io_mode_name(r.mode));
    o["size_bytes"] = r.size_bytes;
    o["lanes"] = r.lanes;
    o["GBps"] = round_to(r.GBps, 4);
    o["iops"] = round_to(r.iops, 1);
    o["lat_us_mean"] = round_to(r.lat_us_mean, 2);
    o["lat_us_p50"] = round_to(r.lat_us_p50, 2);
    o["lat_us_p99"] = round_to(r.lat_us_p99, 2);
    o["engine"] = std::string(io::io_engine_name(r.engine));
    arr.push_back(std::move(o));
  }
  return json_text(arr, 2) + "\n";
}

std::string format_io_csv(const std::vector<IoBenchRow>& rows) {
  std::string out = "mode,size_bytes,lanes,GBps,iops,lat_us_mean,lat_us_p50,lat_us_p99,engine\n";
  for (const IoBenchRow& r : rows) {
    out += csv_join({std::string(io_mode_name(r.mode)), std::to_string(r.size_bytes), std::to_string(r.lanes),
                     fixed(r.GBps, 4), fixed(r.iops, 1), fixed(r.lat_us_mean, 2), fixed(r.lat_us_p50, 2),
                     fixed(r.lat_us_p99, 2), io::io_engine_name(r.engine)}) +
           "\n";
  }
  return out;
}

}  // namespace sluice::bench
