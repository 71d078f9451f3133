// Routing traces: which experts each (token, layer) was routed to.
//
// sluice's own format is JSONL, one record per (token, layer), written by the
// engine in forward order (token-major):
//   {"pos":12,"layer":3,"experts":[5,1],"weights":[0.71,0.29],"hit":[true,false]}
// ("seq" is added when non-zero: an independent sequence, e.g. another prompt.)
//
// The reader also understands the reference traces in shared/data/routing
// (see shared/data/README.md), detected per line by their keys:
//  - Mixtral "*_routing.jsonl" ({problem_id, layer, token_idx, experts,
//    gating_probs}; file order problem -> layer -> token). Re-ordered
//    token-major: for each problem, for each token index t, for each layer L.
//    seq = problem_id. Alignment of the per-layer gaps: upstream dropped rows
//    with weights exactly [0.5, 0.5] and renumbered token_idx per layer, so a
//    short layer's records are placed at their renumbered index — exact up to
//    the dropped row, shifted by -1 (or -2) after it; the short layer simply
//    has no record at its last 1-2 token indices. For a cache this moves a
//    few accesses of one layer by one or two tokens.
//  - Mixtral "humaneval_p0_aligned_per_token.jsonl" ({phase, pos, experts:
//    [[..] x layers]}): one record per non-null layer entry, all in seq 0;
//    decode positions continue after the prompt (pos += prefill length).
//  - Qwen1.5-MoE "moe_routes.jsonl" ({type:"meta"} header, then {type:"route",
//    token_idx, layer, topk_ids, topk_weights}): one record per row; seq =
//    the fused-MoE call index (a new call starts where token_idx resets to 0).
//    Rows inside a call are different requests, not consecutive tokens; the
//    two 8192-row vLLM profiling calls (identical rows) are kept as they are.
//
// Errors: Error naming the file and line for malformed input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <istream>
#include <string>
#include <vector>

#include "io/output_file.h"
#include "io/file.h"

namespace sluice::moe {

struct RouteRecord {
  int seq = 0;       // independent sequence (prompt / problem / batch call)
  int64_t pos = 0;   // token position within the sequence
  int layer = 0;
  std::vector<int> experts;     // distinct ids, descending weight
  std::vector<float> weights;   // same length as experts (may be empty)
  std::vector<bool> hit;        // engine traces: served from the cache (may be empty)
};

struct RouteTrace {
  std::string source;   // file name, for messages
  std::string format;   // "sluice", "mixtral", "mixtral-aligned", "qwen-moe"
  std::vector<RouteRecord> records;  // replay order: token-major within each seq

  int n_layers() const;     // max layer + 1
  int max_top_k() const;    // most experts in one record
  int n_expert() const;     // max expert id + 1
  uint64_t n_tokens() const;  // distinct (seq, pos)
  // One line for a report: "<source>: <format> format, N records, N tokens,
  // N layers, top-K of N experts".
  std::string summary() const;
};

// One JSONL line (no newline) in sluice's format.
std::string route_record_json(const RouteRecord& r);

// Writes records to a JSONL file through io::OutputFile: the file appears
// (replacing an older one) only at close(); without close() (an error, a
// stopped run) the destination is left as it was. Not thread-safe (one writer
// per file). Throws Error naming the path when it is refused (an input of the
// command: opts.inputs), cannot be created, or a write, flush or close fails.
class RouteTraceWriter {
 public:
  explicit RouteTraceWriter(const std::string& path, io::OutputOptions opts = {});
  RouteTraceWriter(const RouteTraceWriter&) = delete;
  RouteTraceWriter& operator=(const RouteTraceWriter&) = delete;
  void write(const RouteRecord& r);
  void close();  // commits the file; throws on failure. A second call does nothing.

 private:
  io::OutputFile out_;
  bool closed_ = false;
};

// Reads a whole trace file through io (read_whole_file: bounded EINTR retry,
// fault-injectable with `wrap`). Traces above kMaxTraceBytes are refused.
inline constexpr uint64_t kMaxTraceBytes = uint64_t{1} << 30;
RouteTrace read_route_trace(const std::string& path, const io::WrapFile& wrap = {});
// Each of `paths` read as above, in order.
std::vector<RouteTrace> read_route_traces(const std::vector<std::string>& paths);
RouteTrace parse_route_trace(std::istream& in, const std::string& name);

}  // namespace sluice::moe
