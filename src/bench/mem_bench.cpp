#include "bench/mem_bench.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace sluice::bench {
namespace {

constexpr uint64_t kLine = 64;

// 32 bytes as one value: GCC lowers it to the build's vector loads.
using Lane = uint64_t __attribute__((vector_size(32)));

// x86 builds target the x86-64 baseline (SSE2); the probe takes the widest
// loads the CPU has, as the engine's GEMV kernels do (dispatched at run time).
#if defined(__x86_64__)
#define SLUICE_WIDEST_LOADS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SLUICE_WIDEST_LOADS
#endif

// Sums [p, p + n) (n a multiple of 64) so every byte is loaded; the result is
// returned so the loads cannot be dropped. The slice is read as four
// interleaved streams, a line of each per step, as a GEMV over a few weight
// rows reads them. Measured on the 2-vCPU AMD EPYC VM, 2026-12-05, 1 GiB, two
// threads: one stream of SSE2 loads 34-36 GB/s, one stream of AVX-512 loads
// 52-54, four streams of 32-byte pairs 57-60, this loop 69-72 (37-38 on one
// thread); software prefetch 256 B to 4 KiB ahead changed nothing. A roofline from the low figure would put a memory-bound label on a
// decode that is not.
SLUICE_WIDEST_LOADS
uint64_t sum_lines(const unsigned char* p, uint64_t n) {
  Lane a{}, b{}, c{}, d{};
  const uint64_t q = n / 4 / kLine * kLine;  // bytes per stream
  for (uint64_t i = 0; i < q; i += kLine) {
    for (uint64_t half = 0; half < kLine; half += sizeof(Lane)) {
      Lane w, x, y, z;
      std::memcpy(&w, p + i + half, sizeof w);
      std::memcpy(&x, p + q + i + half, sizeof x);
      std::memcpy(&y, p + 2 * q + i + half, sizeof y);
      std::memcpy(&z, p + 3 * q + i + half, sizeof z);
      a += w;
      b += x;
      c += y;
      d += z;
    }
  }
  for (uint64_t i = 4 * q; i < n; i += sizeof(Lane)) {  // the lines left over
    Lane w;
    std::memcpy(&w, p + i, sizeof w);
    a += w;
  }
  a += b + c + d;
  return a[0] ^ a[1] ^ a[2] ^ a[3];
}

struct Slice {
  uint64_t begin = 0, size = 0;
};

// Thread i's slice: whole 64-byte lines, the remainder spread over the first ones.
std::vector<Slice> slices(uint64_t bytes, int threads) {
  const uint64_t lines = bytes / kLine, per = lines / threads, extra = lines % threads;
  std::vector<Slice> out;
  uint64_t at = 0;
  for (int i = 0; i < threads; ++i) {
    const uint64_t n = (per + (static_cast<uint64_t>(i) < extra ? 1 : 0)) * kLine;
    out.push_back({at, n});
    at += n;
  }
  return out;
}

MemBenchRow measure(unsigned char* buf, uint64_t bytes, int threads, int passes) {
  const std::vector<Slice> parts = slices(bytes, threads);
  using Clock = std::chrono::steady_clock;
  // Each reader stamps its own start and end of every pass; a pass lasts from
  // the first start to the last end. Timing from a coordinating thread would
  // not do: with as many readers as CPUs it competes with them for a CPU and
  // may look at the clock late.
  const int n_pass = passes + 1;  // pass 0 warms the TLB and caches, untimed
  std::vector<Clock::time_point> start(static_cast<size_t>(threads) * n_pass), end(start.size());
  std::barrier sync(threads);
  std::vector<uint64_t> sink(threads);
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const Slice s = parts[t];
        std::memset(buf + s.begin, t + 1, s.size);  // first touch by the reader
        for (int pass = 0; pass < n_pass; ++pass) {
          sync.arrive_and_wait();  // nobody reads before every slice is touched or the last pass ended
          start[t * n_pass + pass] = Clock::now();
          sink[t] ^= sum_lines(buf + s.begin, s.size);
          end[t * n_pass + pass] = Clock::now();
        }
      });
    }
  }
  std::vector<double> seconds;
  for (int pass = 1; pass < n_pass; ++pass) {
    Clock::time_point first = start[pass], last = end[pass];
    for (int t = 1; t < threads; ++t) {
      first = std::min(first, start[t * n_pass + pass]);
      last = std::max(last, end[t * n_pass + pass]);
    }
    seconds.push_back(std::chrono::duration<double>(last - first).count());
  }
  uint64_t all = 0;
  for (uint64_t v : sink) all ^= v;
  // Keeps the sums observable; whether the branch is taken does not matter.
  if (all == 1) std::this_thread::yield();
  std::sort(seconds.begin(), seconds.end());
  const uint64_t read = bytes / kLine * kLine;
  const double median = seconds.size() % 2 ? seconds[seconds.size() / 2]
                                           : (seconds[seconds.size() / 2 - 1] + seconds[seconds.size() / 2]) / 2;
  return {.threads = threads,
          .bytes = read,
          .GBps_best = static_cast<double>(read) / seconds.front() / 1e9,
          .GBps_median = static_cast<double>(read) / median / 1e9};
}

}  // namespace

std::vector<MemBenchRow> run_mem_bench(const MemBenchConfig& cfg, const std::function<void(const MemBenchRow&)>& on_row) {
  if (cfg.bytes == 0) throw Error("--mem-size: must be above 0");
  if (cfg.passes < 1) throw Error("-r: the memory probe needs at least 1 pass (got " + std::to_string(cfg.passes) + ")");
  if (cfg.threads.empty()) throw Error("-t: no thread counts given");
  for (int t : cfg.threads) {
    if (t < 1) throw Error("-t: thread counts must be at least 1 (got " + std::to_string(t) + ")");
    if (cfg.bytes / kLine < static_cast<uint64_t>(t)) {
      throw Error("--mem-size: " + std::to_string(cfg.bytes) + " bytes give " + std::to_string(t) +
                  " threads less than one 64-byte line each");
    }
  }
  // Not std::vector: its value-initialisation would touch every page from
  // this thread, before the readers' first touch.
  const uint64_t alloc = (cfg.bytes + kLine - 1) / kLine * kLine;
  std::unique_ptr<unsigned char, decltype(&std::free)> buf(static_cast<unsigned char*>(std::aligned_alloc(kLine, alloc)),
                                                           &std::free);
  if (!buf) throw Error("--mem-size: cannot allocate " + std::to_string(cfg.bytes) + " bytes");
  std::vector<MemBenchRow> rows;
  for (int t : cfg.threads) {
    rows.push_back(measure(buf.get(), cfg.bytes, t, cfg.passes));
    if (on_row) on_row(rows.back());
  }
  return rows;
}

double roofline_tokens_per_second(double GBps, uint64_t bytes_per_token) {
  return bytes_per_token ? GBps * 1e9 / static_cast<double>(bytes_per_token) : 0;
}

std::string format_mem_bench(const std::vector<MemBenchRow>& rows, uint64_t decode_read_bytes,
                             const std::string& model, const std::string& format) {
  const bool roof = decode_read_bytes > 0;
  auto fixed = [](double v, int digits) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return std::string(b);
  };
  if (format == "json") {
    nlohmann::json a = nlohmann::json::array();
    for (const MemBenchRow& r : rows) {
      nlohmann::json j = {{"threads", r.threads}, {"bytes", r.bytes}, {"GBps_best", r.GBps_best},
                          {"GBps_median", r.GBps_median}};
      j["decode_read_bytes"] = roof ? nlohmann::json(decode_read_bytes) : nlohmann::json(nullptr);
      j["roofline_tps"] = roof ? nlohmann::json(roofline_tokens_per_second(r.GBps_best, decode_read_bytes))
                               : nlohmann::json(nullptr);
      a.push_back(j);
    }
    return a.dump(2) + "\n";
  }
  std::string s;
  if (format == "csv") {
    s = "threads,bytes,GBps_best,GBps_median,decode_read_bytes,roofline_tps\n";
    for (const MemBenchRow& r : rows) {
      s += std::to_string(r.threads) + "," + std::to_string(r.bytes) + "," + fixed(r.GBps_best, 3) + "," +
           fixed(r.GBps_median, 3) + "," + (roof ? std::to_string(decode_read_bytes) : "") + "," +
           (roof ? fixed(roofline_tokens_per_second(r.GBps_best, decode_read_bytes), 2) : "") + "\n";
    }
    return s;
  }
  s = roof ? "| threads | read GB/s (best) | read GB/s (median) | decode roofline tok/s |\n|--:|--:|--:|--:|\n"
           : "| threads | read GB/s (best) | read GB/s (median) |\n|--:|--:|--:|\n";
  for (const MemBenchRow& r : rows) {
    s += "| " + std::to_string(r.threads) + " | " + fixed(r.GBps_best, 2) + " | " + fixed(r.GBps_median, 2) + " |";
    if (roof) s += " " + fixed(roofline_tokens_per_second(r.GBps_best, decode_read_bytes), 2) + " |";
    s += "\n";
  }
  s += "\n> " + std::to_string(rows.empty() ? 0 : rows.front().bytes >> 20) +
       " MiB read per pass, every thread streaming its own slice; GB = 1e9 bytes.";
  if (roof) {
    s += " Roofline: " + model + " reads " + fixed(static_cast<double>(decode_read_bytes) / 1e9, 3) +
         " GB of weights per decode token with everything resident (dense weights, one row of the token "
         "embedding table, the routed experts; KV reads not included), so in-RAM decode cannot beat read "
         "GB/s / that figure on this machine, whichever engine runs it.";
  }
  return s + "\n";
}

}  // namespace sluice::bench
