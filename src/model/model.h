// The model interface the runtime drives: a decoder-only transformer with its
// KV cache, loaded from a GGUF file.
//
// Ownership: a Model shares ownership of its GgufModel and owns its dense
// weights, expert store, KV cache, thread pool and scratch buffers.
// Thread-safety: a Model is used from one thread at a time (it parallelises
// internally with its own pool).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/kv_cache.h"
#include "moe/trim_config.h"
#include "moe/trims.h"
#include "moe/weight_store.h"

namespace sluice::model {

struct ModelConfig {
  moe::DenseMode dense_mode = moe::DenseMode::Anon;  // how non-expert tensors are made resident
  bool odirect = true;     // O_DIRECT reads (dense anon mode and experts)
  int io_threads = 4;      // expert read lanes
  bool load_all = false;   // keep every expert resident
  int threads = 1;         // compute threads (results do not depend on it)
  KvType kv_type = KvType::F16;
  int n_ctx = 0;           // KV cache positions; 0 = min(context_length, 4096)
  // Routing trims (moe/trims.h); all off by default. `normalize` is ignored:
  // the architecture decides it. Validated by load_model (Error names the flag).
  moe::TrimConfig trims;
  // Positions per forward micro-batch: an eval of T tokens runs in ceil(T/ubatch)
  // passes. Per layer and ubatch, each distinct routed expert is read once and
  // applied to every position routed to it, and --expert-budget caps the
  // distinct experts of one ubatch. 512 is llama.cpp's default n_ubatch; logits
  // do not depend on it unless a batch-level trim (the budget) is on.
  int ubatch = 512;
};

struct ModelStats {
  uint64_t tokens_evaluated = 0;
  uint64_t dense_bytes = 0;
  moe::ExpertIoStats io;  // zero for dense models
  moe::TrimStats trims;   // routing-table entries, summed over positions x MoE layers
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const HParams& hparams() const = 0;
  virtual int n_ctx() const = 0;

  // Evaluates `tokens` at positions pos0, pos0+1, ... and writes their logits,
  // row-major [tokens.size()][n_vocab], to logits_out. The KV cache must hold
  // positions [0, pos0) from earlier calls (pos0 <= cached positions; a smaller
  // pos0 rewinds and overwrites). Throws Error on a bad token id, a position
  // past n_ctx, or an I/O failure (the cache then keeps positions [0, pos0)).
  virtual void eval(std::span<const int32_t> tokens, int pos0, float* logits_out) = 0;
  // Same, but writes only the last token's logits (n_vocab floats).
  virtual void eval_last(std::span<const int32_t> tokens, int pos0, float* logits_out) = 0;

  // Forgets every cached position.
  virtual void reset() = 0;
  virtual int n_cached() const = 0;

  virtual ModelStats stats() const = 0;
};

// Builds the model for `gguf`'s general.architecture ("qwen3moe", "llama").
// Throws Error("unsupported architecture X") for anything else, and
// Error("unsupported tensor type X in tensor Y") for weights sluice cannot use.
std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg);

}  // namespace sluice::model
