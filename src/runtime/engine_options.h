// Engine settings shared by every subcommand that runs a model (run, logits):
// the raw flag values as the user typed them, and their validated conversion
// to a ModelConfig (errors name the flag).
#pragma once

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

  model::ModelConfig to_model_config() const;
};

}  // namespace sluice::runtime
