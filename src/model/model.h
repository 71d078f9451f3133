// The model interface the runtime drives: a decoder-only transformer with its
// per-layer state (model/state/: KV rows, recurrent state), loaded from a GGUF file.
//
// Ownership: a Model shares ownership of its GgufModel and owns its dense
// weights, expert store, model state, thread pool and scratch buffers.
// Thread-safety: a Model is used from one thread at a time (it parallelises
// internally with its own pool).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "io/file.h"
#include "io/uring_queue.h"
#include "model/hparams.h"
#include "model/state/kv_rows.h"
#include "model/state/state_spec.h"
#include "model/resident_layout.h"
#include "moe/expert_usage.h"
#include "moe/route_trace.h"
#include "moe/trim_config.h"
#include "moe/trims.h"
#include "moe/dense_weights.h"
#include "moe/expert_store.h"
#include "util/error.h"

namespace sluice::model {

// ModelConfig::prefetch values for `--prefetch auto` and `--prefetch prefill`.
inline constexpr int kPrefetchAuto = -1;
inline constexpr int kPrefetchPrefill = -2;
// The most sequence slots a model holds (ModelConfig::n_slots, --parallel).
inline constexpr int kMaxSlots = 256;

struct ModelConfig {
  moe::DenseMode dense_mode = moe::DenseMode::Anon;  // how non-expert tensors are made resident
  bool odirect = true;     // O_DIRECT reads (dense anon mode and experts)
  int io_threads = 4;      // expert read lanes (pread engine)
  io::IoEngine io_engine = io::IoEngine::Pread;  // --io-engine: how expert reads are issued
  int io_depth = 8;        // --io-depth: reads in flight (uring engine)
  bool load_all = false;   // keep every expert resident
  int threads = 1;         // compute threads (results do not depend on it)
  KvType kv_type = KvType::F16;
  int n_ctx = 0;           // context (KV rows per layer); 0 = min(context_length, 4096)
  // Memory the process may use (MemAvailable, lowered to the cgroup's room),
  // read by the runtime before loading; a model state above it is refused with an
  // Error naming -c. 0: unknown, not checked.
  uint64_t memory_bytes = 0;
  // Routing trims (moe/trims.h); all off by default. `normalize` is ignored:
  // the architecture decides it. Validated by load_model (Error names the flag).
  moe::TrimConfig trims;
  // Positions per forward micro-batch: an eval of T tokens runs in ceil(T/ubatch)
  // passes. Per layer and ubatch, each distinct routed expert is read once and
  // applied to every position routed to it, and --expert-budget caps the
  // distinct experts of one ubatch. 512 is llama.cpp's default n_ubatch; logits
  // do not depend on it unless a batch-level trim (the budget) is on.
  int ubatch = kDefaultUbatch;
  moe::LoadProgressFn on_dense_progress;  // optional: dense-weight loading progress (see moe/dense_weights.h)

  // Expert cache (MoE models; ignored with load_all). Sized ONCE at load.
  // Fixed: cache_bytes > 0 (checked against the mechanical floor: Error naming
  // --cache-mb). Auto: cache_auto with cache_meminfo, the /proc/meminfo text the
  // runtime read just before loading; the budget is MemAvailable minus the
  // dense set, KV cache, scratch and headroom, clamped to
  // [max(cache_floor_bytes, mechanical floor), min(cache_ceil_bytes, all experts)].
  uint64_t cache_bytes = 0;        // 0 = off (unless cache_auto)
  bool cache_auto = false;
  std::string cache_meminfo;       // auto only
  uint64_t cache_floor_bytes = 0;  // auto: lower clamp (0: the mechanical floor)
  uint64_t cache_ceil_bytes = 0;   // auto: upper clamp (0: every expert of the model)
  // Route trace: one record per (token, layer) in token-major order. Shared so
  // the writer outlives the model; used from the model's thread only.
  std::shared_ptr<moe::RouteTraceWriter> route_trace;
  // --route-replay (a benchmark mode): a recorded routing trace replaces the
  // router's choices in every MoE layer, mapped as moe/route_replay.h says
  // (Error for a dense model). Logits then depend on the trace, but still
  // never on threads, I/O settings or the cache. --prefetch then reads the
  // next layer's REPLAYED experts (an exact prediction, for measuring overlap).
  std::shared_ptr<const moe::RouteTrace> route_replay;
  // Diagnostics at load (how the cache was sized, demand warnings): one line
  // per call, no trailing newline. Null: silent.
  std::function<void(const std::string&)> log;
  // --prefetch: after a MoE layer's attention, predict the NEXT layer's
  // experts (its router applied to the current hidden state; under
  // route_replay, the replayed routing itself) and start reading them while
  // this layer's experts compute. Never changes results (see Transformer).
  // Ignored (logged) where it cannot help or could change results: dense
  // models, load_all, and --drop-cold-experts with an expert cache (drop-cold
  // asks the cache, whose contents prefetch changes).
  // Value: 0 off (the default: on the measured machine neither prefill nor
  // decode won with it, docs/benchmarks.md "Prefill prefetch"); kPrefetchPrefill
  // prefetches every predicted expert of micro-batches of more than one
  // position (prefill: the next layer's union read while this layer's
  // expert GEMM runs) and nothing at decode; otherwise how many of each
  // position's predicted experts to read ahead at every batch size, most
  // probable first: kPrefetchAuto half the
  // top-k (at least 1), N >= 1 capped at the top-k. Why a depth at decode:
  // the lanes idle only during the short non-expert part of a layer
  // (attention, router, the last expert's compute); the few most probable
  // predictions fill it and are nearly always right, while the tail of the
  // prediction is the part that misses and wastes reads.
  // Memory: while layer l computes, the next layer's prefetch holds its own
  // slots (or pinned cache entries): moe::experts_in_flight_bytes.
  int prefetch = 0;
  // --mtp: load the file's (first) NextN/MTP head so mtp_eval() can draft.
  // Error when the file has none.
  bool mtp = false;
  // Tests: wrap every file the expert store opens (ExpertStoreConfig::wrap_file)
  // and every file the dense loader opens (DenseConfig::wrap_file), e.g. in an
  // io::FaultFile. Separate, so a test can fault one path only. Empty: none.
  io::WrapFile wrap_expert_file;
  io::WrapFile wrap_dense_file;
  // --resident-layout: Packed re-lays weights that stay in memory (dense
  // matmul weights in anon mode, cached and --load-all experts) once into the
  // kernels' packed layout where the type has one; Plain keeps the file's
  // rows. Logits are bit-identical either way (model/packed_layout.h).
  ResidentLayout resident_layout = ResidentLayout::Packed;
  // Sequence slots (`sluice serve --parallel`): the model holds this many
  // independent trunk states (KV rows, recurrent state, checkpoints each),
  // each sized by the same state_spec rule, all checked against
  // memory_bytes together. Slot 0 is what the single-sequence API uses;
  // eval_batch() evaluates several slots in one forward. The NextN head's
  // state (--mtp) belongs to slot 0 only.
  int n_slots = 1;
  // Lazy slot state (`sluice serve`): every slot's state starts released and
  // holds memory only between slot_allocate() and slot_release(); the caller
  // (server::Scheduler) keeps what is allocated within slot_state_budget().
  // Off: every slot is allocated at load, as the single-sequence API needs.
  bool lazy_slots = false;
  // lazy_slots: the bytes the slots' states may hold at once (--state-mb;
  // 0: n_slots slots' worth). The one figure the load-time memory check and
  // --cache-mb auto take off for the slots (the NextN head's rows besides).
  uint64_t slot_state_budget = 0;
};

// One sequence of an eval_batch(): `tokens` appended to slot `slot` at its
// n_past(). logits_out gets every row ([tokens.size()][n_vocab]) when
// all_rows, else the last row only; null: no logits wanted.
struct SequenceEval {
  int slot = 0;
  std::span<const int32_t> tokens;
  float* logits_out = nullptr;
  bool all_rows = false;
};

// What batching several sequences saved, over the MoE layers of every
// eval_batch() forward pass (a step): per layer, the distinct experts the
// union of the step's rows routed to, beside the sum over its sequences of
// each one's own distinct experts (what they would have needed alone), in
// experts and in bytes. Invariant: union_experts <= sequence_experts.
struct BatchCounters {
  uint64_t steps = 0;             // forward passes of eval_batch()
  uint64_t rows = 0;              // rows (positions) over those passes
  uint64_t sequences = 0;         // sequences over those passes (sum of batch sizes)
  uint64_t union_experts = 0;     // distinct experts per (step, layer), summed
  uint64_t sequence_experts = 0;  // per (step, layer, sequence) distinct experts, summed
  uint64_t union_bytes = 0;       // their expert bytes (gate+up+down)
  uint64_t sequence_bytes = 0;
  // The last step alone (its batch size and expert figures), for /metrics.
  int last_sequences = 0;
  int last_rows = 0;
  uint64_t last_union_experts = 0;
  uint64_t last_sequence_experts = 0;
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


// The --prefetch depth in force for a micro-batch of `n_tokens` positions and
// a layer top-k of `top_k`: 0 for off; kPrefetchPrefill: top_k when
// n_tokens > 1, else 0; kPrefetchAuto: half the top-k (at least 1); else
// min(setting, top_k). Error for any other negative setting.
int prefetch_depth_for_batch(int setting, int top_k, int n_tokens);
// The depth in force at decode (one position): prefetch_depth_for_batch(setting, top_k, 1).
int resolve_prefetch_depth(int setting, int top_k);

// --prefetch accounting, over the MoE layer batches that had a prefetch
// (every MoE layer but the first of each ubatch, at batch sizes where
// prefetch is in force: prefill micro-batches included).
// Invariant: experts == used + wasted.
struct PrefetchCounters {
  uint64_t layers = 0;   // layer batches that had a prefetch
  uint64_t experts = 0;  // distinct experts prefetched (predicted)
  uint64_t used = 0;     // of those, needed by the real routing (after trims) and served by the prefetch
  uint64_t wasted = 0;   // of those, not used (mispredicted, or their read failed)
  uint64_t needed = 0;   // distinct experts the real routing needed in those layer batches
  uint64_t failed = 0;   // needed prefetched experts whose read failed and were read again
  // Of `used`, those the prefetch read (not found in the cache): misses taken
  // off their layer's critical path. With a cache this is what prefetch buys.
  uint64_t read_ahead = 0;
  // Expert bytes (gate+up+down) of wasted experts the prefetch did not find in
  // the cache: reads asked for and not used. A read still queued when its layer
  // finished is cancelled, so at most this much was really read.
  uint64_t wasted_bytes = 0;
  // Fraction of the needed experts the prefetch delivered (0 when none were
  // needed); at most depth / top-k at decode.
  double coverage() const { return needed ? static_cast<double>(used) / static_cast<double>(needed) : 0.0; }
  // Fraction of the prefetched experts that were needed (0 when none were prefetched).
  double precision() const { return experts ? static_cast<double>(used) / static_cast<double>(experts) : 0.0; }
};

struct ModelStats {
  uint64_t tokens_evaluated = 0;
  uint64_t dense_bytes = 0;
  moe::ExpertIoStats io;  // zero for dense models
  ExpertCounters experts;  // zero for dense models
  TimeProfile time;
  moe::TrimStats trims;   // routing-table entries, summed over positions x MoE layers
  int expert_budget = 0;  // --expert-budget in force (0 = off), for the summary
  int prefetch = 0;       // --prefetch depth in force at decode (after the load-time rules; 0: off)
  int prefill_prefetch = 0;  // the depth in force for micro-batches of more than one position
  PrefetchCounters prefetch_counters;
  std::string route_replay;  // RouteReplay::describe() when --route-replay is on; empty otherwise
  BatchCounters batch;    // eval_batch() steps (zero without them)
  ResidentLayout resident_layout = ResidentLayout::Packed;  // --resident-layout in force
  uint64_t dense_packed_bytes = 0;  // dense bytes re-laid into the packed layout at load
  // Experts are re-laid as they enter the cache (or at --load-all): the layout
  // is packed, the experts stay resident, and some expert type is packable.
  bool experts_packed = false;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const HParams& hparams() const = 0;
  virtual int n_ctx() const = 0;

  // Evaluates `tokens` at positions pos0, pos0+1, ... and writes their logits,
  // row-major [tokens.size()][n_vocab], to logits_out. eval only APPENDS:
  // pos0 must equal n_past() (Error naming both numbers otherwise: roll back
  // with truncate() first). Throws Error on a bad token id, a position past
  // n_ctx, or an I/O failure; the state then holds positions [0, n_past()),
  // which is pos0, or less for a recurrent layer that had to fall back to a
  // checkpoint (see truncate).
  virtual void eval(std::span<const int32_t> tokens, int pos0, float* logits_out) = 0;
  // Same, but writes only the last token's logits (n_vocab floats).
  virtual void eval_last(std::span<const int32_t> tokens, int pos0, float* logits_out) = 0;

  // Forgets every position and checkpoint (the head's too).
  virtual void reset() = 0;
  // Positions the state holds: the next eval's pos0.
  virtual int n_past() const = 0;
  // Explicit rollback to n <= n_past() (Error otherwise, naming both).
  // Returns the position the state really holds afterwards, r <= n: KV rows
  // roll back exactly (r == n); a recurrent layer restores the newest
  // checkpoint at or before n (or the zero state, r = 0) and every layer is
  // cut to r. The caller re-evaluates its tokens [r, n) (runtime::Session
  // does, and counts them). The NextN head's rows are not touched (mtp_truncate).
  virtual int truncate(int n) = 0;
  // Remembers the recurrent layers' state at n_past() so a later truncate to
  // at or after this position needs no recomputation from 0. A no-op for a
  // model whose layers all keep KV rows. A few are kept, oldest dropped first.
  virtual void checkpoint() {}
  // Also checkpoints the recurrent layers at the end of each of the next
  // eval's first n rows (MTP verification), so truncating a rejected draft
  // re-evaluates nothing. A no-op where checkpoint() is one.
  virtual void checkpoint_rows(int n) { (void)n; }
  // Bytes of the state allocated at load (KV rows and recurrent state of the
  // trunk and, when loaded, of the NextN head).
  virtual StateBytes state_bytes() const { return {}; }
  virtual ModelStats stats() const = 0;

  // Sequence slots (ModelConfig::n_slots). Slot 0 is the state the calls
  // above use; every slot keeps the same contract (append-only eval,
  // truncate, checkpoints), independent of the others. An out-of-range slot
  // is an Error naming it.
  virtual int n_slots() const { return 1; }
  virtual int slot_n_past(int slot) const;
  virtual int slot_truncate(int slot, int n);
  virtual void slot_checkpoint(int slot);
  virtual void slot_reset(int slot);
  // Bytes of one slot's trunk state (every slot is alike).
  virtual StateBytes slot_state_bytes() const { return state_bytes(); }
  // Lazy slot state (ModelConfig::lazy_slots): allocate() gives a released
  // slot its memory, empty (std::bad_alloc when there is none: the slot stays
  // released); release() frees it (the slot is then empty); evaluating a
  // released slot is an Error. Without lazy_slots every slot stays allocated.
  virtual void slot_allocate(int slot) { (void)slot; }
  virtual void slot_release(int slot) { slot_reset(slot); }
  virtual bool slot_allocated(int slot) const { return true; }
  // The bytes the slots' states may hold at once: n_slots() slots' worth
  // unless ModelConfig::slot_state_budget set it.
  virtual uint64_t slot_state_budget() const { return static_cast<uint64_t>(n_slots()) * slot_state_bytes().total(); }
  // A slot's whole trunk state as bytes (model/state/state_io.h): positions,
  // KV rows, recurrent state; slot_load() replaces a slot's state with such
  // bytes (Error naming the field when they do not fit this model; the slot
  // is then empty) and slot_copy() copies one slot's state into another.
  // The NextN head's rows are not part of it (mtp_truncate(0) after a load).
  virtual void slot_save(int slot, std::string& out) const { throw Error("this model cannot save a slot's state"); }
  virtual void slot_load(int slot, std::string_view in) { throw Error("this model cannot load a slot's state"); }
  virtual void slot_copy(int src, int dst) {
    std::string bytes;
    slot_save(src, bytes);
    slot_load(dst, bytes);
  }
  // One forward over several sequences (distinct slots, each appending at its
  // n_past()): attention and recurrent mixers run per sequence on its own
  // state, every row-wise block over the stacked rows, so each MoE layer
  // reads each needed expert once for the union of the sequences' routes
  // (and --expert-budget caps that union). Rows never mix: without a
  // batch-level trim (the budget) each sequence's logits are bit-identical to
  // evaluating it alone. Passes hold at most ModelConfig::ubatch rows; a
  // sequence longer than that is split over passes. Error (nothing evaluated)
  // for a repeated or bad slot, a bad token, or a context overflow; an
  // evaluation failing part-way leaves every slot as eval() would.
  virtual void eval_batch(std::span<const SequenceEval> seqs);

  // MTP (ModelConfig::mtp, a file with a NextN block): speculative drafts.
  virtual bool has_mtp() const { return false; }
  // Floats per row of the NextN head's hidden input and of its g: n_embd, or
  // for a model with hyper-connection streams (deepseek4) the streams side by
  // side, hc x n_embd (what llama.cpp hands its MTP graph too).
  virtual int64_t mtp_hidden_width() const { return hparams().n_embd; }
  // eval() (all_rows) or eval_last() that also writes every row's hidden
  // state [T][mtp_hidden_width()]: after output_norm (the vector the lm head
  // multiplies; the NextN head's input), or deepseek4's last streams before
  // the hyper-connection head.
  virtual void eval_hidden(std::span<const int32_t> tokens, int pos0, float* logits_out, float* hidden_out,
                           bool all_rows = true) {
    throw Error("this model has no MTP head loaded");
  }
  // The NextN head over rows i = (tokens[i], hidden[i]) at positions pos0 + i:
  // hidden[i] is the trunk's eval_hidden row of the PREVIOUS position (zeros
  // at position 0) or a previous draft's g. The head keeps its own KV rows:
  // pos0 must equal mtp_n_past() (Error otherwise; mtp_truncate first). Writes the draft logits [T][n_vocab]
  // and, when g_out is set, the head's output [T][mtp_hidden_width()] (the
  // hidden input of a chained draft step: normalised, or deepseek4's streams).
  // all_rows = false: logits_out gets the last row only (one row of n_vocab).
  virtual void mtp_eval(std::span<const int32_t> tokens, const float* hidden, int pos0, float* logits_out,
                        float* g_out, bool all_rows = true) {
    throw Error("this model has no MTP head loaded");
  }
  virtual int mtp_n_past() const { return 0; }
  // Exact rollback of the head's KV rows to n <= mtp_n_past() (Error otherwise).
  virtual void mtp_truncate(int n) {
    if (n != 0) throw Error("this model has no MTP head loaded");
  }

  // Bytes of one routed expert (gate+up+down) of `layer`; 0 for a layer
  // without routed experts (and for dense models).
  virtual uint64_t expert_bytes(int layer) const { return 0; }
  // Fraction of the dense (non-expert) weights resident in RAM (mincore; cost
  // grows with the dense size, so sample it, do not call it per layer).
  virtual double dense_resident_fraction() const { return 1.0; }
  // Positions routed to each (trunk layer, expert) since load, after trims
  // (--save-usage). Empty (n_layer 0) for dense models.
  virtual moe::ExpertUsage expert_usage() const { return {}; }
};

// Builds the model for `gguf`'s general.architecture (model/arch.h's registry:
// llama, qwen3moe, gpt-oss, glm4moe, deepseek2). Throws Error("FILE: unsupported architecture X
// (supported: ...)") for anything else, Error("unsupported tensor type X in
// tensor Y") for weights sluice cannot use, and an Error naming the tensor for
// a tensor no block of the architecture claims.
std::unique_ptr<Model> load_model(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg);

}  // namespace sluice::model
