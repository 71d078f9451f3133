// Engine settings shared by every subcommand that runs a model (run, logits):
// the raw flag values as the user typed them, and their validated conversion
// to a ModelConfig (errors name the flag).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"

namespace sluice::runtime {

// Online CPUs (std::thread::hardware_concurrency), at least 1: the -t default.
int default_thread_count();

// --prefetch value -> ModelConfig::prefetch: "off" or "0" -> 0, "prefill" ->
// model::kPrefetchPrefill, "auto" -> model::kPrefetchAuto, N (1..1024, capped
// at the layer's top-k at load) -> N.
// Error names `flag` and the value otherwise.
int parse_prefetch(const std::string& value, const std::string& flag = "--prefetch");

struct EngineOptions {
  std::string model_path;            // -m, as a file (a store reference resolved by the CLI)
  std::string model_name;            // -m as typed (the path itself, or e.g. "qwen3:30b-a3b")
  int threads = default_thread_count();  // -t (results never depend on it)
  std::string dense_weights = "anon";  // --dense-weights mmap|warm|anon
  std::string resident_layout = "packed";  // --resident-layout packed|plain (model/resident_layout.h)
  bool no_odirect = false;           // --no-odirect
  int io_threads = 4;                // --io-threads
  std::string io_engine = "pread";   // --io-engine pread|uring
  int io_depth = 8;                  // --io-depth (uring: reads in flight, 1..4096)
  bool load_all = false;             // --load-all
  std::string kv_type = "f16";       // --kv-type f16|f32
  int n_ctx = 0;                     // -c (0: min(context_length, 4096))
  int ubatch = model::kDefaultUbatch;  // --ubatch: positions per forward micro-batch
  moe::TrimConfig trims;             // --moe-top-k, --moe-top-p, --expert-budget, --drop-cold-experts
  // Set by the CLI: applies the SLUICE_TOPK / SLUICE_TOPP / SLUICE_EXPERT_BUDGET
  // environment fallbacks (bare names too) for trim flags not given, then validates (Error names the flag
  // or variable). Empty: `trims` is only validated. Keeps getenv in the CLI.
  std::function<void(moe::TrimConfig&)> resolve_trims;
  std::string cache_mb = "off";      // --cache-mb N|auto|off (MiB; 0 = off)
  int64_t cache_floor_mb = 0;        // --cache-floor-mb (auto: lower clamp; 0 = mechanical floor)
  int64_t cache_ceil_mb = 0;         // --cache-ceil-mb (auto: upper clamp; 0 = every expert)
  std::string route_trace;           // --route-trace FILE (JSONL; empty: none)
  std::string route_replay;          // --route-replay TRACE (benchmark mode; empty: the router decides)
  std::string prefetch = "off";      // --prefetch[=N|auto|prefill|off]: read the next layer's predicted experts early
  // Files the command reads besides the model (a prompt file): the
  // --route-trace output refuses to be any of them, or any of the model's files.
  std::vector<std::string> extra_inputs;
  // Where engine notices go (the CLI's, which -q silences); empty: stderr.
  // Becomes ModelConfig::log.
  std::function<void(const std::string&)> log;

  // Validates and converts. With --cache-mb auto it reads /proc/meminfo now
  // (before the model loads); with --route-trace it opens FILE's writer
  // (the file appears when the caller closes ModelConfig::route_trace). Notices,
  // from here and from loading, go to `log`. Runs resolve_trims, so the environment is read
  // once per call: call it once per command.
  model::ModelConfig to_model_config() const;
};

}  // namespace sluice::runtime
