// Run telemetry: one record per model evaluation (a prefill batch, or one
// decode token) and the end-of-run summary, with their text forms.
//
// Where the numbers come from: model::ModelStats (cumulative counters and the
// forward pass's time profile, see model/model.h) is snapshotted around each
// eval and the record holds the deltas; major faults come from
// getrusage(RUSAGE_SELF). Nothing here changes what the model computes.
//
// Output contract (parsed by scripts, keep stable):
//   progress line  "tok I n N ms X io X compute X stall X routed R hit H read D dropped P MiB X majflt F dense_res X"
//   CSV            header csv_header(), one csv_row() per record
//   summary        "# summary key=value ..." and "SLUICE_DONE {json}", same keys, same order
//   budget         "EXPERT_BUDGET=N (dropped X experts, ~Y GB I/O saved)" (only with an expert budget)
//   The prefetch_* summary keys come next to last (zero when --prefetch is off),
//   then the mtp_* keys and the per-emitted-token figures, then route_replay
//   (true when --route-replay replaced the router: a benchmark mode), then
//   resident_layout, dense_packed_MiB, experts_packed and experts_transformed
//   (--resident-layout).
//
// Thread-safety: none; a recorder belongs to one Session (one thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/output_file.h"
#include "model/model.h"
#include "moe/cache_budget.h"

namespace sluice::telemetry {

// Decode: one token; Verify: --mtp, the trunk over the last token and the
// drafts; Draft: --mtp, the NextN head (catch-up rows and draft steps).
enum class EvalKind { Prefill, Decode, Verify, Draft };
const char* eval_kind_name(EvalKind k);  // "prefill" | "decode" | "verify" | "draft"

struct TokenRecord {
  int index = 0;  // record number within the session, from 0
  EvalKind kind = EvalKind::Decode;
  int n_tokens = 0;  // tokens in this eval (1 for decode)
  int emitted = 0;   // tokens this eval produced for the output: decode 1, verify 1 + accepted drafts
  int pos = 0;       // KV position of its first token
  double ms = 0;          // wall time of the eval
  double io_ms = 0;       // expert read time, summed over read lanes (may exceed ms)
  double stall_ms = 0;    // compute thread blocked on expert I/O
  double compute_ms = 0;  // ms - stall_ms
  model::ExpertCounters experts;  // routed == hit + read + dropped
  model::PrefetchCounters prefetch;  // --prefetch: this eval's share (zero when off)
  uint64_t bytes_read = 0;        // expert bytes the lanes read (O_DIRECT: aligned covers)
  uint64_t reads = 0;             // read requests behind bytes_read
  uint64_t majflt = 0;            // major page faults of the process during the eval
  double dense_res = 1.0;         // dense resident fraction, as last sampled
  bool dense_res_sampled = false; // sampled at this record (else carried over)

  double mib_read() const { return static_cast<double>(bytes_read) / 1048576.0; }
};

struct TelemetryConfig {
  // Sample DenseWeights::resident_fraction() (mincore over the dense set) on
  // the first record and then every N records; 0: never per record.
  int dense_res_every = 16;
};

// Snapshots counters around each eval and keeps the records.
class TokenRecorder {
 public:
  explicit TokenRecorder(TelemetryConfig cfg = {}) : cfg_(cfg) {}

  void set_config(const TelemetryConfig& cfg) { cfg_ = cfg; }
  // Called with each new record (e.g. --progress, --csv). May throw; the
  // exception propagates out of the eval that produced the record.
  void set_on_record(std::function<void(const TokenRecord&)> cb) { on_record_ = std::move(cb); }

  // begin() before the eval, end() after it succeeded. end() appends the
  // record, calls the callback and returns the record.
  void begin(const model::Model& m);
  // `emitted`: tokens the eval produced for the output (-1: n_tokens for a
  // decode, 0 otherwise).
  const TokenRecord& end(const model::Model& m, EvalKind kind, int n_tokens, int pos, int emitted = -1);

  const std::vector<TokenRecord>& records() const { return records_; }

 private:
  struct Snapshot {
    model::ModelStats stats;
    uint64_t majflt = 0;
    std::chrono::steady_clock::time_point t;
  };
  TelemetryConfig cfg_;
  std::function<void(const TokenRecord&)> on_record_;
  Snapshot before_;
  double last_dense_res_ = 1.0;
  std::vector<TokenRecord> records_;
};

// Major page faults so far (getrusage RUSAGE_SELF); peak RSS is util's peak_rss_mib().
uint64_t major_faults();

// --mtp accounting over a run's speculative steps.
struct MtpCounters {
  int depth = 0;                // --mtp N (or --ngram-draft N) in force (0: off)
  int ngram = 0;                // --ngram N: the drafts came from prompt lookup, not the NextN head
  uint64_t steps = 0;           // draft + verify rounds (trunk verify forwards)
  uint64_t drafted = 0;         // draft tokens proposed (each costs a verify row)
  uint64_t accepted = 0;        // of those, accepted by the trunk
  // Per draft position 1..depth: proposed there, and accepted there (a draft
  // after a rejected one is proposed but never accepted).
  std::vector<uint64_t> drafted_at, accepted_at;
  uint64_t plain_steps = 0;     // --mtp auto: single-token decode steps while drafting was off
  uint64_t switches = 0;        // --mtp auto: on/off changes
  double accept_pct() const { return drafted ? 100.0 * static_cast<double>(accepted) / drafted : 0.0; }
};

struct SummaryOptions {
  uint64_t cache_budget_bytes = 0;  // expert cache size; 0 = cache off
  int expert_budget = 0;            // experts-per-token budget trim; 0 = off
};

// Everything summarize() needs; Session::summary() fills it.
struct SummaryInput {
  std::span<const TokenRecord> records;
  model::ModelStats stats;  // cumulative, at the end of the run
  // Per layer (expert_bytes 0: no routed experts): token and layer demand,
  // as moe::token_demand_bytes and moe::cache_floor_bytes at ubatch 1 size them.
  std::vector<moe::MoeLayerShape> moe_layers;
  double ttft_ms = 0;  // first token's latency; <= 0: the first record's ms
  double dense_resident_frac = 1.0;
  double peak_rss_mib = 0;
  MtpCounters mtp;
  uint64_t recomputed_tokens = 0;  // Session::recomputed_tokens()
  SummaryOptions opts;
};

struct RunSummary {
  int prefill_tokens = 0;
  double prefill_s = 0;
  int decode_tokens = 0;
  double decode_s = 0;
  double ttft_ms = 0;
  uint64_t token_demand_bytes = 0;
  uint64_t layer_demand_bytes = 0;
  uint64_t cache_budget_bytes = 0;
  int expert_budget = 0;
  model::ExpertCounters experts;  // over the records
  uint64_t bytes_read = 0;        // over the records
  uint64_t reads = 0;
  double io_lane_s = 0;  // read time summed over lanes, over the records
  uint64_t majflt = 0;   // over the records' evals
  double dense_resident_frac = 1.0;
  uint64_t dense_bytes = 0;
  // --resident-layout in force, the dense bytes it re-laid at load, and
  // whether experts are re-laid as they enter the cache (or at --load-all),
  // and how many experts were re-laid (resident ones, and streamed ones of
  // prompt batches that several positions use: model/moe_ffn.h).
  model::ResidentLayout resident_layout = model::ResidentLayout::Packed;
  uint64_t dense_packed_bytes = 0;
  bool experts_packed = false;
  uint64_t experts_transformed = 0;
  double peak_rss_mib = 0;
  model::TimeProfile time;
  int prefetch = 0;                           // --prefetch depth in force (0: off)
  model::PrefetchCounters prefetch_counters;  // over the records
  MtpCounters mtp;
  // --route-replay: RouteReplay::describe() (empty: the router decided). The
  // summary's key route_replay says true/false; the human summary
  // prints this line, so no replayed figure passes for the router's.
  std::string route_replay;
  // Decode phase (decode, verify and draft evals): what each emitted token cost.
  uint64_t decode_bytes_read = 0;
  uint64_t decode_experts_read = 0;  // expert loads (reads) in the decode phase
  uint64_t decode_forwards = 0;      // trunk forwards in the decode phase (decode + verify evals)
  // Tokens re-evaluated after a rollback fell back to an earlier checkpoint
  // (recurrent layers; 0 when every layer keeps KV rows).
  uint64_t recomputed_tokens = 0;

  double prefill_tps() const { return prefill_s > 0 ? prefill_tokens / prefill_s : 0.0; }
  double decode_tps() const { return decode_s > 0 ? decode_tokens / decode_s : 0.0; }
  double cache_hit_pct() const;  // hit / (hit + read); 0 when nothing was fetched
  double read_gbps() const;      // bytes_read over the eval wall time (what streaming achieved)
  double majflt_per_tok() const;
  double io_saved_gb() const { return static_cast<double>(experts.dropped_bytes) / 1e9; }
  double prefetch_wasted_mib_per_tok() const;
  double decode_mib_per_tok() const;
  double decode_experts_per_tok() const;
  double tokens_per_forward() const;
};

// Pure. Token counts, expert counters, bytes/reads/lane time and faults are
// summed over the records (so reads done at load, e.g. --load-all, are not
// counted); the time profile and dense size come from `stats`.
RunSummary summarize(const SummaryInput& in);

// Text forms.
nlohmann::ordered_json summary_json(const RunSummary& s);
std::string summary_human(const RunSummary& s);      // several lines, each ending in '\n'
std::string expert_budget_line(const RunSummary& s); // "" when no budget is set

std::string progress_line(const TokenRecord& r);  // no newline
std::string csv_header();                         // no newline
std::string csv_row(const TokenRecord& r);        // no newline

// Streams records to a CSV file through io::OutputFile: the header at open,
// one row per write(); the file appears (replacing an older one) at close(),
// and without close() the destination is left as it was. Throws Error naming
// the path when it is refused (an input: opts.inputs), cannot be created, or
// a write, flush or close fails.
class CsvWriter {
 public:
  explicit CsvWriter(const std::string& path, io::OutputOptions opts = {});
  void write(const TokenRecord& r);
  void close();  // commits the file; throws on failure. A second call does nothing.

 private:
  io::OutputFile out_;
  bool closed_ = false;
};

}  // namespace sluice::telemetry
