// Engine settings shared by every subcommand that runs a model (run, logits):
// the raw flag values as the user typed them, and their validated conversion
// to a ModelConfig (errors name the flag).
#pragma once

#include <cstdint>
#include <string>

#include "model/model.h"

namespace sluice::runtime {

// Online CPUs (std::thread::hardware_concurrency), at least 1: the -t default.
int default_thread_count();

struct EngineOptions {
  std::string model_path;            // -m
  int threads = default_thread_count();  // -t (results never depend on it)
  std::string dense_weights = "anon";  // --dense-weights mmap|warm|anon
  bool no_odirect = false;           // --no-odirect
  int io_threads = 4;                // --io-threads
  bool load_all = false;             // --load-all
  std::string kv_type = "f16";       // --kv-type f16|f32
  int n_ctx = 0;                     // -c (0: min(context_length, 4096))
  std::string cache_mb = "off";      // --cache-mb N|auto|off (MiB; 0 = off)
  int64_t cache_floor_mb = 0;        // --cache-floor-mb (auto: lower clamp; 0 = mechanical floor)
  int64_t cache_ceil_mb = 0;         // --cache-ceil-mb (auto: upper clamp; 0 = every expert)
  std::string route_trace;           // --route-trace FILE (JSONL; empty: none)

  // Validates and converts. With --cache-mb auto it reads /proc/meminfo now
  // (before the model loads); with --route-trace it creates FILE. Log lines
  // from loading go to stderr.
  model::ModelConfig to_model_config() const;
};

}  // namespace sluice::runtime
