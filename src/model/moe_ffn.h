// The routed-expert FFN of one MoE layer for a batch of tokens.
//
// Experts are requested from the ExpertStore as one batch (the union over the
// tokens) and computed in whatever order their reads complete, each into its
// own per-(token, slot) buffer; the weighted sum is then taken in routing slot
// order. So the result is bit-identical whatever the I/O timing, io-thread
// count or dense/expert storage mode.
//
// Rows of the routing table may have any length (routing trims shorten them);
// a position with an empty row gets a zero routed-expert output.
#pragma once

#include <vector>

#include "model/ffn.h"
#include "model/model.h"
#include "model/router.h"
#include "moe/trims.h"
#include "moe/weight_store.h"

namespace sluice::model {

// Shapes/types of one layer's experts; data pointers are filled per expert.
struct ExpertTemplate {
  FfnMatrices m;  // gate/up/down with data == nullptr
};

class MoeFfn {
 public:
  // xn: routing.n_positions() rows of n_embd (normed input); out: as many rows
  // of n_embd, overwritten with sum over row t's slots s of
  // weight(t, s) * expert_{expert(t, s)}(xn_t), summed in slot order (0 for an empty row).
  // `drops`: the distinct experts the trims removed from this batch (counted
  // as routed and dropped; their bytes count as saved only when they were not
  // cached, since dropping a cache hit saves no I/O).
  void run(int layer, const ExpertTemplate& tmpl, const float* xn, const moe::RoutingTable& routing,
           const RouteDrops& drops, moe::ExpertStore& store, float* out, ThreadPool& pool);

  // Totals over every run() (never reset). Counters follow ExpertCounters'
  // contract; `read` is this layer batch's delta of the store's experts_read,
  // so it assumes no other Batch of the same store completes reads meanwhile.
  const ExpertCounters& counters() const { return counters_; }
  double io_seconds() const { return io_s_; }          // blocked in fetch()/next_ready()
  double matmul_seconds() const { return matmul_s_; }  // the rest of run()

 private:
  ExpertCounters counters_;
  double io_s_ = 0;
  double matmul_s_ = 0;
  QuantizedRows act_gate_, act_up_;
  SwiGlu swiglu_;
  std::vector<float> slot_out_;    // [routing entries][n_embd], row-major by (position, slot)
  std::vector<size_t> row_start_;  // first entry of each position in slot_out_
  std::vector<float> expert_out_;  // [tokens of one expert][n_embd]
  std::vector<const void*> rows_gate_, rows_up_;
};

}  // namespace sluice::model
