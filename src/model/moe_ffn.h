// The routed-expert FFN of one MoE layer for a batch of tokens.
//
// Experts are requested from the ExpertStore as one batch (the union over the
// tokens) and computed in whatever order their reads complete, each into its
// own per-(token, slot) buffer; the weighted sum is then taken in routing slot
// order. So the result is bit-identical whatever the I/O timing, io-thread
// count, dense/expert storage mode, or which batch (a --prefetch batch started
// a layer early, or this layer's own) delivered an expert.
//
// Rows of the routing table may have any length (routing trims shorten them);
// a position with an empty row gets a zero routed-expert output.
#pragma once

#include <functional>
#include <vector>

#include "model/ffn.h"
#include "model/model.h"
#include "model/router.h"
#include "moe/trims.h"
#include "moe/expert_store.h"

namespace sluice::model {

// Shapes/types of one layer's experts; data pointers are filled per expert.
// The per-expert biases are resident (dense set): row e of each is expert e's.
struct ExpertTemplate {
  FfnMatrices m;  // gate/up/down with data == nullptr
  Activation act = Activation::SwiGlu;
  float clamp = 0.0f;                // SwiGluClamped: L (FfnDesc::clamp)
  const float* gate_bias = nullptr;  // [n_expert][n_ff], or null
  const float* up_bias = nullptr;    // [n_expert][n_ff], or null
  const float* down_bias = nullptr;  // [n_expert][n_embd], or null
  float weights_scale = 1.0f;        // multiplies every routing weight (RouterDesc::weights_scale)
  const float* expert_scale = nullptr;  // [n_expert]: multiplies expert e's output (Gemma 4's
                                        // ffn_down_exps.scale), or null
};

// A streamed expert (cache off) that at least this many (position, slot)
// entries of one batch use is asked to arrive in the packed layout
// (moe::FetchOptions::transform_streamed): the read lane re-lays it, and the
// batch's multi-column matmul then runs the packed kernels. Re-laying costs
// about one pass over the expert's bytes (4.3 GB of Q4_0 experts in 0.65 s of
// CPU); at 4 columns the packed Q4_0 kernel saves about that much over the
// plain one (100 vs 41 GMAC/s from DRAM, docs/benchmarks.md), at 8+ it saves
// more, at 1 (decode) it never pays. Results do not depend on it (packed_dot
// is bit-identical to vec_dot).
inline constexpr size_t kMinUsesToPackStreamed = 4;

// Experts of one layer whose reads were started before that layer was routed
// (--prefetch). Owns the Batch: the views of its experts live as long as it.
struct PrefetchedExperts {
  int layer = -1;
  std::vector<int> experts;  // distinct ids, most probable first, as fetched
  std::vector<uint8_t> hit;  // per expert: the cache served it without a read
  moe::ExpertStore::Batch batch;
};

// Where one run() gets its experts from.
struct ExpertSource {
  moe::ExpertStore* store = nullptr;
  bool all_resident = false;  // --load-all: every fetched expert counts as a hit
  // This layer's prefetch (its experts are used, the rest fetched), or null.
  // run() consumes what it needs; the caller destroys it afterwards.
  PrefetchedExperts* prefetched = nullptr;
  // Called once, right after this layer's own reads were submitted (so a
  // prefetch it starts queues behind them), before any expert is computed.
  // Must not throw.
  std::function<void()> after_submit;
};

class MoeFfn {
 public:
  // xn: routing.n_positions() rows of n_embd (normed input); out: as many rows
  // of n_embd, overwritten with sum over row t's slots s of
  // (weights_scale * weight(t, s)) * expert_{expert(t, s)}(xn_t), summed in
  // slot order (0 for an empty row).
  // `drops`: the distinct experts the trims removed from this batch (counted
  // as routed and dropped; their bytes count as saved only when they were not
  // cached, since dropping a cache hit saves no I/O).
  // Prefetch errors: a prefetched expert whose read failed is read again when
  // needed (an error of that read surfaces as without prefetch); a failed
  // prefetch of an unneeded expert is ignored.
  void run(int layer, const ExpertTemplate& tmpl, const float* xn, const moe::RoutingTable& routing,
           const RouteDrops& drops, const ExpertSource& src, float* out, ThreadPool& pool);

  // Totals over every run() (never reset). Counters follow ExpertCounters'
  // contract; an expert counts as read when the batch that served it (this
  // layer's, or its prefetch) read it, as hit when the cache (or load_all) did.
  const ExpertCounters& counters() const { return counters_; }
  const PrefetchCounters& prefetch_counters() const { return prefetch_; }
  double io_seconds() const { return io_s_; }          // blocked in fetch()/next_ready()
  double matmul_seconds() const { return matmul_s_; }  // the rest of run()
  // The last run()'s distinct experts (ascending) and whether the cache served
  // each without a read (load_all: never a hit), as ExpertStore::last_fetch
  // would say had one fetch served them all (route traces).
  const moe::ExpertStore::FetchRecord& served() const { return served_; }

 private:
  // Computes distinct expert `i` of the current run from its bytes.
  void compute_expert(size_t i, const moe::ExpertView& view, int layer, const ExpertTemplate& tmpl,
                      const QuantizedRows& act_up, int64_t n_out, ThreadPool& pool);

  ExpertCounters counters_;
  PrefetchCounters prefetch_;
  moe::ExpertStore::FetchRecord served_;
  double io_s_ = 0;
  double matmul_s_ = 0;
  QuantizedRows act_gate_, act_up_;
  SwiGlu swiglu_;
  std::vector<moe::DistinctExpert> distinct_;  // the current run's experts
  std::vector<float> slot_out_;    // [routing entries][n_embd], row-major by (position, slot)
  std::vector<size_t> row_start_;  // first entry of each position in slot_out_
  std::vector<float> expert_out_;  // [tokens of one expert][n_embd]
  std::vector<const void*> rows_gate_, rows_up_;
};

}  // namespace sluice::model
