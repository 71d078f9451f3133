// io_bench — the storage device's own random-read ceiling, measured the way
// the expert store reads: N lanes (threads), each issuing one blocking pread
// of a fixed size at a random 4 KiB-aligned offset, back to back.
//
// Why: decode speed when experts stream from flash is bounded by the device's
// random-read bandwidth at the expert-slice sizes. `sluice bench --io` measures
// that bound once per machine; the model benchmark later reports
// io_efficiency = achieved GB/s / ceiling_GBps(...) at the same size and lanes.
//
// Modes: "direct" opens the file O_DIRECT (aligned buffers; the read size is
// rounded up to 4 KiB) so the page cache is bypassed. "buffered" uses ordinary
// pread, by default with POSIX_FADV_RANDOM (no readahead, so each read costs
// exactly its own bytes; see buffered_fadv_random), and drops the file's
// cached pages before every point so the point starts cold. A buffered point can still re-hit pages it read earlier in the
// same point when the file is small; io_bench_notes() says when that applies.
//
// Thread-safety: run_io_bench blocks and owns every thread it starts; the
// formatting and parsing functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "io/uring_queue.h"

namespace sluice::gguf {
class GgufModel;
}

namespace sluice::bench {

enum class IoMode { Direct, Buffered };
std::string_view io_mode_name(IoMode m);  // "direct" / "buffered"

// One measured point. GBps = bytes / seconds / 1e9 (decimal GB, like device
// datasheets); latency is per pread, wall clock, in microseconds.
struct IoBenchRow {
  IoMode mode = IoMode::Direct;
  // Pread: `lanes` threads, one blocking pread each. Uring: one thread keeping
  // `lanes` reads in flight through an io_uring (lanes = the queue depth).
  io::IoEngine engine = io::IoEngine::Pread;
  uint64_t size_bytes = 0;  // requested read size (the key ceiling_GBps looks up)
  uint64_t read_bytes = 0;  // bytes each pread actually asked for (size rounded up to 4 KiB for direct)
  int lanes = 0;
  uint64_t reads = 0;       // preads completed in the point, all lanes
  uint64_t bytes = 0;       // reads * read_bytes
  double seconds = 0;       // wall time from the start signal until the last lane stopped
  double GBps = 0;
  double iops = 0;
  double lat_us_mean = 0;
  double lat_us_p50 = 0;
  double lat_us_p99 = 0;
};

// The most concurrent readers one point may have (--lanes, --io-depth).
inline constexpr int kMaxIoBenchLanes = 1024;

struct IoBenchConfig {
  std::string path;                 // file to read (must be at least as large as the largest read)
  std::vector<uint64_t> sizes;      // bytes per read, each > 0
  std::vector<int> lanes = {1, 2, 4, 8, 16};  // concurrent readers per point, each >= 1
  std::vector<IoMode> modes = {IoMode::Direct, IoMode::Buffered};
  // Uring: every point is one thread with `lanes` reads in flight (--io-depth).
  io::IoEngine engine = io::IoEngine::Pread;
  double seconds_per_point = 2.0;   // each point stops after this long ...
  uint64_t max_bytes_per_point = 0; // ... or once this many bytes were read (0: no budget)
  uint64_t seed = 1;                // offsets are a deterministic function of (seed, point, lane)
  // Buffered mode: advise POSIX_FADV_RANDOM (no readahead). Off measures the
  // kernel's default readahead policy, which is what a plain pread user gets.
  bool buffered_fadv_random = true;
  // Called after each point, in order (progress reporting). May be empty.
  std::function<void(const IoBenchRow&)> on_row;
};

// Runs every (mode, size, lanes) point in that nesting order and returns one
// row per point. Throws sluice::Error naming the file or the config field when
// the file cannot be opened, is smaller than a read, the config is invalid, or
// a read fails. If O_DIRECT is refused by the filesystem: throws when Direct is
// the only mode, otherwise skips the direct points (io_bench_notes says so).
std::vector<IoBenchRow> run_io_bench(const IoBenchConfig& cfg);

// Human-readable caveats for this config and machine: the file is smaller than
// RAM (buffered numbers may be cache-inflated), O_DIRECT unavailable, etc.
// Never throws for a missing file (returns a note instead).
std::vector<std::string> io_bench_notes(const IoBenchConfig& cfg);

// Distinct per-expert slice sizes of a MoE model, ascending: the bytes of one
// expert in each stacked 3-D "*_exps" tensor (gate, up, down), i.e. what the
// expert store reads per matrix; for an expert-major file (sluice repack), the
// span of one expert's gate..down extent, which the store reads as one piece.
// Empty when the model has no expert tensors.
std::vector<uint64_t> expert_slice_sizes(const gguf::GgufModel& model);

// ---- building blocks (exposed for tests) ------------------------------------

// Deterministic stream of random read offsets for one lane: every offset is a
// multiple of 4 KiB and offset + read_bytes <= file_size. Uniform over the
// possible aligned offsets (multiply-shift mapping, no modulo bias worth
// mentioning). Throws Error when read_bytes == 0 or read_bytes > file_size.
class RandomOffsets {
 public:
  RandomOffsets(uint64_t file_size, uint64_t read_bytes, uint64_t seed);
  uint64_t next();
  uint64_t slots() const { return slots_; }  // number of distinct offsets it can return

 private:
  uint64_t state_;
  uint64_t slots_;
};

// Bytes each pread asks for in `mode`: size itself when buffered, size rounded
// up to 4 KiB when direct.
uint64_t io_read_bytes(IoMode mode, uint64_t size);

struct LatencySummary {
  double mean_us = 0, p50_us = 0, p99_us = 0;
};
// Nearest-rank percentiles (p50 = element ceil(0.50*n) of the sorted list) of
// per-read latencies in nanoseconds. Reorders `ns`. All zero for an empty list.
LatencySummary summarize_latencies(std::vector<uint64_t>& ns);

// The measured GB/s nearest to (size, lanes) among pread rows of the given mode:
// first the nearest size (by ratio), then among those the nearest lane count
// (by ratio; ties go to the larger count). Throws Error when no row of that
// mode exists.
double ceiling_GBps(const std::vector<IoBenchRow>& rows, uint64_t size, int lanes, bool direct);

// For each (mode, size) in first-seen order, the row with the highest GB/s.
std::vector<IoBenchRow> best_rows(const std::vector<IoBenchRow>& rows);

// ---- flag parsing (throw Error("FLAG: ...") on bad input) --------------------

// "4096", "4K", "64KiB", "1M", "2.5M", "1G" (binary multiples; fractional
// values are rounded to the nearest byte). Must be > 0.
uint64_t parse_size(std::string_view text, const std::string& flag);
std::vector<uint64_t> parse_size_list(std::string_view csv, const std::string& flag);
// Comma-separated lane counts, each in [1, 1024].
std::vector<int> parse_lane_list(std::string_view csv, const std::string& flag);
// "4.0 KiB", "1.0 MiB", "864.0 KiB", "123 B" — for table labels.
std::string format_size(uint64_t bytes);

// ---- output --------------------------------------------------------------------

// Markdown table, then one "best" line per (mode, size), then each note as a
// "> note" line.
std::string format_io_markdown(const std::vector<IoBenchRow>& rows, const std::vector<std::string>& notes);
// JSON array of {"mode","size_bytes","lanes","GBps","iops","lat_us_mean","lat_us_p50","lat_us_p99"}.
std::string format_io_json(const std::vector<IoBenchRow>& rows);
// CSV with a header line of the same columns as the JSON keys.
std::string format_io_csv(const std::vector<IoBenchRow>& rows);

}  // namespace sluice::bench
