// mem_bench — the machine's memory read bandwidth, measured the way a decode
// step reads resident weights: T threads, each reading its own contiguous
// slice of one large buffer once per pass as four interleaved streams with the
// CPU's widest loads (mem_bench.cpp says why), every byte loaded and summed.
//
// Why: decode of a resident MoE model reads every weight of the dense part and
// of the routed experts once per token, so its ceiling is (read bandwidth at
// the engine's thread count) / (weight bytes read per token). `sluice bench
// --mem` measures the first figure (a STREAM-like probe, read-only like a
// GEMV's weights), so a decode tok/s can be put beside its roofline on the
// machine it ran on, for any engine that reads the same file.
//
// Method: the buffer is first touched by the thread that later reads each slice
// (so its pages are where that thread runs), then `passes` timed passes run
// with all threads released together; a pass lasts from the release until the
// last thread finishes. GBps = buffer bytes / pass seconds / 1e9.
//
// Thread-safety: run_mem_bench blocks and owns every thread it starts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sluice::bench {

struct MemBenchConfig {
  uint64_t bytes = uint64_t{1} << 30;  // buffer size, split evenly between the threads
  std::vector<int> threads = {1};      // one measured point per entry, in order
  int passes = 5;                      // timed passes per point (after one untimed warm pass)
};

struct MemBenchRow {
  int threads = 0;
  uint64_t bytes = 0;      // bytes read per pass
  double GBps_best = 0;    // fastest pass
  double GBps_median = 0;  // median pass
};

// Runs every point; on_row (optional) is called after each. Throws
// sluice::Error naming the flag for an empty buffer, a thread count below 1,
// fewer than 1 pass, or a buffer too small to give each thread one 64-byte line.
std::vector<MemBenchRow> run_mem_bench(const MemBenchConfig& cfg,
                                       const std::function<void(const MemBenchRow&)>& on_row = {});

// The decode roofline: at most `GBps` * 1e9 / `bytes_per_token` tokens per second
// (0 when bytes_per_token is 0).
double roofline_tokens_per_second(double GBps, uint64_t bytes_per_token);

// The rows as "md" (a table, and with a model the roofline explained), "csv"
// (threads,bytes,GBps_best,GBps_median,decode_read_bytes,roofline_tps; the last
// two empty without a model) or "json" (an array of objects with those keys).
// decode_read_bytes: tools::Sizing::decode_read_bytes of `model`, 0 for none;
// the roofline uses each row's best pass.
std::string format_mem_bench(const std::vector<MemBenchRow>& rows, uint64_t decode_read_bytes,
                             const std::string& model, const std::string& format);

}  // namespace sluice::bench
