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
  moe::LoadProgressFn on_dense_progress;  // optional: dense-weight loading progress (see weight_store.h)
};

// Routed-expert accounting, counted per (layer, eval batch) over the DISTINCT
// experts the batch's tokens select in that layer (at decode, one token: the
// top_k experts). Invariant, kept by the forward pass:
//   routed == hit + read + dropped
// read: fetched from disk; hit: served without a read (expert cache or
// --load-all); dropped: removed by a routing trim before the fetch (and then
// dropped == dropped_top_p + dropped_budget + dropped_cold).
struct ExpertCounters {
  uint64_t routed = 0;
  uint64_t hit = 0;
  uint64_t read = 0;
  uint64_t dropped = 0;
  uint64_t dropped_top_p = 0;
  uint64_t dropped_budget = 0;
  uint64_t dropped_cold = 0;
  uint64_t dropped_bytes = 0;  // expert bytes not read thanks to trims
};

// Where the forward pass spent its wall time (steady_clock, compute thread).
// The parts partition eval_s: other_s() covers embedding, norms, routers,
// dense FFNs and the lm head.
struct TimeProfile {
  double eval_s = 0;           // inside Model::eval / eval_last
  double expert_io_s = 0;      // blocked on expert I/O (fetch + waiting for reads)
  double expert_matmul_s = 0;  // routed-expert FFN math (incl. activation quantize, weighted sum)
  double attention_s = 0;      // attention block: QKV/output projections, RoPE, KV store, attention
  double other_s() const { return eval_s - expert_io_s - expert_matmul_s - attention_s; }
};

struct ModelStats {
  uint64_t tokens_evaluated = 0;
  uint64_t dense_bytes = 0;
  moe::ExpertIoStats io;  // zero for dense models
  ExpertCounters experts;  // zero for dense models
  TimeProfile time;
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

  // Bytes of one routed expert (gate+up+down) of `layer`; 0 for a layer
  // without routed experts (and for dense models).
  virtual uint64_t expert_bytes(int layer) const { return 0; }
  // Fraction of the dense (non-expert) weights resident in RAM (mincore; cost
  // grows with the dense size, so sample it, do not call it per layer).
  virtual double dense_resident_fraction() const { return 1.0; }
};

// Builds the model for `gguf`'s general.architecture ("qwen3moe", "llama").
// Throws Error("unsupported architecture X") for anything else, and
// Error("unsupported tensor type X in tensor Y") for weights sluice cannot use.
std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg);

}  // namespace sluice::model
