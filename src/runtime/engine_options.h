// Engine settings shared by every subcommand that runs a model (run, logits):
// the raw flag values as the user typed them, and their validated conversion
// to a ModelConfig (errors name the flag).
#pragma once

#include <functional>
#include <string>

#include "model/model.h"

namespace sluice::runtime {

struct EngineOptions {
  std::string model_path;            // -m
  int threads = 1;                   // -t
  std::string dense_weights = "anon";  // --dense-weights mmap|warm|anon
  bool no_odirect = false;           // --no-odirect
  int io_threads = 4;                // --io-threads
  bool load_all = false;             // --load-all
  std::string kv_type = "f16";       // --kv-type f16|f32
  int n_ctx = 0;                     // -c (0: min(context_length, 4096))
  int ubatch = 512;                  // --ubatch: positions per forward micro-batch
  moe::TrimConfig trims;             // --moe-top-k, --moe-top-p, --expert-budget, --drop-cold-experts
  // Set by the CLI: applies the TOPK / TOPP / EXPERT_BUDGET environment
  // fallbacks for trim flags not given, then validates (Error names the flag
  // or variable). Empty: `trims` is only validated. Keeps getenv in the CLI.
  std::function<void(moe::TrimConfig&)> resolve_trims;

  // Validated ModelConfig; runs resolve_trims (so the environment is read
  // once per call: call it once per command).
  model::ModelConfig to_model_config() const;
};

}  // namespace sluice::runtime
