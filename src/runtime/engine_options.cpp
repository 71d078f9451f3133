#include "runtime/engine_options.h"

#include "util/error.h"

namespace sluice::runtime {

model::ModelConfig EngineOptions::to_model_config() const {
  if (model_path.empty()) throw Error("-m: no model file given");
  if (threads < 1) throw Error("-t: thread count must be >= 1 (got " + std::to_string(threads) + ")");
  if (io_threads < 1) throw Error("--io-threads: must be >= 1 (got " + std::to_string(io_threads) + ")");
  if (n_ctx < 0) throw Error("-c: context size must be >= 0 (got " + std::to_string(n_ctx) + ")");
  if (ubatch < 1) throw Error("--ubatch: must be >= 1 (got " + std::to_string(ubatch) + ")");
  model::ModelConfig c;
  c.ubatch = ubatch;
  c.trims = trims;
  if (resolve_trims) {
    resolve_trims(c.trims);
  } else {
    moe::validate_trim_config(c.trims);
  }
  c.dense_mode = moe::parse_dense_mode(dense_weights);
  c.odirect = !no_odirect;
  c.io_threads = io_threads;
  c.load_all = load_all;
  c.threads = threads;
  c.kv_type = model::parse_kv_type(kv_type);
  c.n_ctx = n_ctx;
  return c;
}

}  // namespace sluice::runtime
