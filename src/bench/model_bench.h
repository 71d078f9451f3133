// model_bench — `sluice bench -m MODEL`, in the manner of llama-bench: sweep
// engine settings, and for each configuration load the model once and time
// -r repetitions of (prefill of a -p token random prompt, then -n single-token
// decode steps). Reports throughput, expert bytes read per decoded token, the
// achieved expert read bandwidth, cache hits, peak RSS, and — given the
// device's random-read ceiling from `sluice bench --io` — how close the reads
// and the decode come to that ceiling.
//
// Definitions (all per configuration, decode phase only unless named):
//   prefill_tps / decode_tps   mean over reps of tokens / wall seconds (sd: sample
//                              standard deviation, 0 for one rep).
//   mib_read_per_token         decode expert bytes read / decode tokens, all reps.
//   read_GBps                  decode expert bytes read / decode WALL seconds
//                              (decimal GB, like the io bench).
//   read_GBps_io               decode expert bytes read / (io_seconds / io_threads):
//                              io_seconds is time inside pread summed over lanes, so
//                              this is the bandwidth while the lanes were reading
//                              (exact when the lanes read concurrently).
//   cache_hit_pct              experts_hit / (experts_hit + experts_read) * 100.
//   ceiling_GBps               io-bench GB/s nearest to (mean decode read size,
//                              io_threads) in the run's mode (direct / buffered).
//   io_efficiency              read_GBps_io / ceiling_GBps: how well the reads
//                              themselves use the device.
//   roofline_efficiency        decode_tps / (ceiling_GBps / GB read per token):
//                              how close the whole decode comes to the I/O bound.
//   moe_top_k                  experts per token in force (the swept --moe-top-k,
//                              or the model's own k); 0 for a dense model.
//   cache                      the --cache-mb setting as swept: "off", "auto" or MiB.
//   cache_MiB                  the expert cache budget as resolved at load (auto
//                              sized from MemAvailable / the cgroup's room); 0 = off.
//   mem_cap_MiB                the memory limit this process ran under: the smallest
//                              cgroup memory.max (v2) / memory.limit_in_bytes (v1)
//                              on its cgroup path; NaN (null) when unlimited.
// Values that cannot be computed (no ceiling, no reads, no decode) are NaN and
// print as "n/a" (null in JSON).
//
// Thread-safety: run_model_bench blocks and owns its Sessions; the other
// functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/io_bench.h"

namespace sluice::bench {

struct ModelBenchConfig {
  std::string model_path;
  int n_prompt = 512;  // -p: prompt tokens per rep (>= 1)
  int n_gen = 128;     // -n: decode steps per rep (>= 1)
  int reps = 3;        // -r (>= 1)
  // Swept parameters: every combination runs, in BenchPoint's field order
  // (threads outermost, cache innermost). Each value has the meaning and
  // validation of the engine flag of the same name (runtime::EngineOptions).
  std::vector<int> threads = {1};
  std::vector<int> io_threads = {4};
  std::vector<std::string> dense_weights = {"anon"};
  std::vector<std::string> resident_layout = {"packed"};  // --resident-layout: packed, plain
  std::vector<int> moe_top_k = {0};            // --moe-top-k; 0 = the model's own k
  std::vector<std::string> cache_mb = {"off"};  // --cache-mb: "off", "auto" or MiB
  std::vector<std::string> prefetch = {"off"};  // --prefetch: "off", "prefill", "auto" or a depth N
  std::vector<int> expert_budget = {0};         // --expert-budget (0 = off)
  std::vector<int> mtp = {0};                   // --mtp drafts per step (0 = off; needs a NextN block)
  // Fixed for the whole run.
  bool odirect = true;
  bool load_all = false;
  bool cold = false;          // drop the model files' cached pages before each rep
  std::string kv_type = "f16";
  // --route-replay TRACE: every point replays this routing trace instead of
  // the router (model::ModelConfig::route_replay); rows say so. Empty: off.
  std::string route_replay;
  // --save-usage FILE: the expert-usage profile (moe/expert_usage.h) summed
  // over every configuration, written after the last one. Empty: none.
  std::string save_usage;
  std::string io_engine = "pread";  // --io-engine (fixed for the run)
  int io_depth = 8;                 // --io-depth (uring)
  uint64_t seed = 1;          // prompt token ids are a function of (seed, rep)
  // The device ceiling (io bench rows); empty = none, efficiencies are n/a.
  std::vector<IoBenchRow> ceiling;
  // Progress lines (stderr in the CLI). May be empty.
  std::function<void(const std::string&)> on_progress;
};

// One swept combination. Adding a swept engine setting: a field here, its
// list in ModelBenchConfig, one `sweep(...)` line in bench_points, one line
// in the EngineOptions/ModelConfig conversion, and its output column.
struct BenchPoint {
  int threads = 1;
  int io_threads = 4;
  std::string dense_weights = "anon";
  std::string resident_layout = "packed";  // --resident-layout
  int moe_top_k = 0;          // 0 = the model's own k
  std::string cache_mb = "off";
  std::string prefetch = "off";  // --prefetch setting: off, prefill, auto or a depth N
  int expert_budget = 0;         // --expert-budget (0 = off)
  int mtp = 0;                   // --mtp drafts per step (0 = off)
};

// The cartesian product of the swept lists, in BenchPoint's field order:
// threads outermost, then io_threads, dense_weights, resident_layout, moe_top_k, cache_mb,
// prefetch, expert_budget and mtp innermost; each list in the order given.
std::vector<BenchPoint> bench_points(const ModelBenchConfig& cfg);

struct ModelBenchRow {
  std::string model;  // file name of the model (no directory)
  BenchPoint point;
  bool odirect = true, load_all = false, cold = false;
  std::string route_replay;  // the trace's file name (no directory) when replayed; empty: the router
  std::string io_engine = "pread";  // --io-engine
  int io_depth = 0;                 // uring: reads in flight (0 with pread)
  int n_prompt = 0, n_gen = 0, reps = 0;

  double prefill_tps = 0, prefill_tps_sd = 0;
  double decode_tps = 0, decode_tps_sd = 0;
  // Decode totals over all reps (the basis of the derived figures).
  uint64_t decode_tokens = 0;
  double decode_seconds = 0;
  uint64_t decode_bytes_read = 0;
  uint64_t decode_reads = 0;
  uint64_t decode_experts_read = 0;
  uint64_t decode_experts_hit = 0;
  uint64_t decode_experts_unused = 0;  // of decode_experts_read: prefetched, never used
  double decode_io_seconds = 0;

  double mib_read_per_token = 0;
  double read_GBps = 0;     // wall based
  double read_GBps_io = 0;  // io_seconds based (NaN when no io time)
  // Decode: lane-seconds busy reading / (lanes x decode seconds), in %: how
  // much of the wall time the read lanes were kept busy (the overlap of reads
  // with compute). Unlike the efficiencies it does not depend on a ceiling
  // measured at another moment, so it holds on a disk whose speed drifts.
  // NaN when nothing was read.
  double lane_busy_pct = 0;
  double cache_hit_pct = 0; // NaN when no expert was requested
  double peak_rss_MiB = 0;  // of this configuration (see run_model_bench)
  // Machine conditions (util/machine_conditions.h): the 1-minute load average
  // when the configuration started, and this process's transparent huge pages
  // after its last repetition (did the resident weights and slots get them?).
  double load1 = 0;
  double anon_huge_MiB = 0;

  double read_size_bytes = 0;  // mean decode read size (NaN when no reads)
  double ceiling_GBps = 0;     // NaN when unknown
  double io_efficiency = 0;
  double roofline_efficiency = 0;

  // Resolved at load / read from the process (see the definitions above).
  int moe_top_k = 0;                 // experts per token in force; 0: dense model
  int prefetch_depth = 0;            // --prefetch depth in force (0: off)
  // --mtp: decode's drafts accepted / proposed (NaN: off), emitted tokens per
  // trunk forward, and routed experts read per emitted token (any point).
  double mtp_accept_pct = 0;
  double tokens_per_forward = 0;
  double experts_read_per_token = 0;
  double prefetch_precision_pct = 0; // decode: prefetched experts used / experts prefetched (NaN: prefetch off)
  double prefetch_coverage_pct = 0;  // decode: prefetched experts used / experts needed (NaN: prefetch off)
  double cache_MiB = 0;              // resolved expert cache budget; 0 = off
  double mem_cap_MiB = 0;            // NaN when the process has no memory limit
  // Prefill (the prompt's eval), means per rep: where its time went
  // (TimeProfile's expert_io_s and expert_matmul_s), and the prefetch in
  // force for prefill micro-batches and the share of prefill's needed experts
  // it delivered (NaN: no prefill prefetch ran).
  int prefill_prefetch_depth = 0;
  double prefill_stall_s = 0;
  double prefill_matmul_s = 0;
  double prefill_prefetch_coverage_pct = 0;
  // Decode, per emitted token: the compute thread's wait for expert reads and
  // its expert matmul time (the same two timers). With the cache on, the
  // matmul figure against --load-all's on the same tokens says whether cached
  // experts compute as fast as resident ones, apart from the reads of misses.
  double decode_stall_ms_per_tok = 0;
  double decode_matmul_ms_per_tok = 0;
};

// Fills the derived figures (mib_read_per_token, read_GBps, read_GBps_io,
// cache_hit_pct, read_size_bytes) from the decode totals, then the ceiling
// figures from `ceiling` (empty: NaN). Pure; used by run_model_bench and tests.
void derive_figures(ModelBenchRow& row, const std::vector<IoBenchRow>& ceiling);

// Runs every configuration. Before running any, checks every point the way
// the engine does (EngineOptions::to_model_config) and, on the model's
// metadata, each --moe-top-k against the expert count and each fixed
// --cache-mb against the mechanical floor; throws sluice::Error naming the flag
// (-p, -n, -r, -t, --io-threads, --dense-weights, --moe-top-k, --cache-mb).
// Propagates load / I/O errors. Peak RSS is the process's high-water mark while the
// configuration ran (reset between configurations through
// /proc/self/clear_refs where the kernel allows; otherwise getrusage's
// lifetime maximum).
std::vector<ModelBenchRow> run_model_bench(const ModelBenchConfig& cfg);

// ---- the device ceiling ------------------------------------------------------

// Parses the JSON that `sluice bench --io FILE -o json` writes (an array of
// objects with at least "mode", "size_bytes", "lanes", "GBps"). `where` names
// the source in errors.
std::vector<IoBenchRow> parse_io_bench_json(std::string_view text, const std::string& where);
// Reads and parses FILE (errors name --io-ceiling and FILE).
std::vector<IoBenchRow> load_io_ceiling(const std::string& path);
// A quick ceiling measurement on the model's first file: its expert slice
// sizes, the given lane counts, one mode (direct iff `direct`), `seconds` per
// point. Throws Error when the model has no expert tensors.
std::vector<IoBenchRow> measure_ceiling(const std::string& model_path, const std::vector<int>& lanes, bool direct,
                                        double seconds, const std::function<void(const IoBenchRow&)>& on_row);

// ---- flag parsing (throw Error("FLAG: ...")) ---------------------------------

// Comma list of integers, each in [lo, hi].
std::vector<int> parse_int_list(std::string_view csv, const std::string& flag, int lo, int hi);
// Comma list of dense-weight modes (mmap|warm|anon).
std::vector<std::string> parse_dense_list(std::string_view csv, const std::string& flag);
// --resident-layout list: packed and/or plain (Error naming the flag otherwise).
std::vector<std::string> parse_layout_list(std::string_view csv);
// Comma list of --cache-mb settings, each parsed by the engine's
// moe::parse_cache_mb (errors name --cache-mb) and written canonically:
// "auto", "off" (for "off" and "0") or the MiB number without leading zeros.
std::vector<std::string> parse_cache_mb_list(std::string_view csv);
// Comma list of --prefetch settings, each parsed by the engine's
// runtime::parse_prefetch and written canonically: "prefill", "off" (for "off" and "0"),
// "auto" or the depth without leading zeros.
std::vector<std::string> parse_prefetch_list(std::string_view csv);

// ---- output --------------------------------------------------------------------

// Markdown table, one row per configuration, then a legend line.
std::string format_bench_markdown(const std::vector<ModelBenchRow>& rows);
// JSON array of row objects (config + figures; NaN as null).
std::string format_bench_json(const std::vector<ModelBenchRow>& rows);
// CSV: a header line, then one line per row; NaN as an empty field.
std::string format_bench_csv(const std::vector<ModelBenchRow>& rows);

}  // namespace sluice::bench
