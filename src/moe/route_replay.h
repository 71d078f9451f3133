// RouteReplay — a recorded routing trace (moe/route_trace.h) mapped onto a
// model's layers and experts, to stand in for the router in benchmarks
// (`--route-replay TRACE`), so cache, I/O and prefetch figures on synthetic
// weights carry a real model's expert locality.
//
// The mapping (documented in docs/benchmarks.md; tests/unit/route_replay_test.cpp
// pins it):
//  - Tokens: the trace's (seq, pos) tokens in replay order (token-major). A
//    token that lacks a record for some trace layer (the Mixtral traces' per-
//    layer gaps) is skipped. The engine's n-th routed position (counted over
//    every eval of the model, from 0) replays trace token n mod n_tokens().
//  - Layers: model MoE layer l replays trace layer l mod L_trace, so adjacent
//    model layers replay adjacent trace layers (a model with fewer layers uses
//    the trace's first ones).
//  - Experts and top-k: with trace top-k k_t (per record) and model top-k k,
//    each trace expert e stands for a group of m = ceil(k / k_t) model experts
//    e*m + j (j = 0..m-1), taken mod E_model, in the record's order (descending
//    weight), and the first k distinct ids are kept. An id already in the row
//    (possible only when the model has fewer than E_trace*m experts) moves to
//    the next free id (mod E_model). Each member of a group gets its trace
//    expert's weight / m (uniform 1/k_t when the trace has no weights); the
//    kept weights are renormalised to sum to 1, and slots are sorted by
//    descending weight, ties to the lower id (the router's slot contract).
//    Consequence: per layer at most E_trace*m distinct experts are used
//    (Mixtral 8 x top-2 onto 128 x top-8: 32 of 128), and an expert group is
//    always fetched together, so an LRU's hit rate on the replay equals its hit
//    rate on the trace itself with m-times larger experts.
//
// Pure computation; immutable after construction (thread-safe to read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe/route_trace.h"

namespace sluice::moe {

class RouteReplay {
 public:
  // Throws Error naming --route-replay and the trace when it has no complete
  // token, or when n_expert < top_k or top_k < 1.
  RouteReplay(const RouteTrace& trace, int n_expert, int top_k);

  uint64_t n_tokens() const { return n_tokens_; }      // complete trace tokens replayed
  uint64_t skipped_tokens() const { return skipped_; }  // trace tokens lacking a layer
  int trace_layers() const { return trace_layers_; }
  int trace_experts() const { return trace_experts_; }
  int trace_top_k() const { return trace_top_k_; }
  int top_k() const { return k_; }
  int group() const { return group_; }  // m for the widest trace record
  const std::string& source() const { return source_; }
  // One line for logs and telemetry: the trace, its shape and the mapping.
  std::string describe() const;

  // The k experts (distinct) and weights of replayed position `token` (any
  // value; wraps) at model layer `layer` (>= 0), in slot order.
  const int32_t* experts(uint64_t token, int layer) const { return &experts_[offset(token, layer)]; }
  const float* weights(uint64_t token, int layer) const { return &weights_[offset(token, layer)]; }

 private:
  size_t offset(uint64_t token, int layer) const {
    const uint64_t t = token % n_tokens_;
    const int tl = layer % trace_layers_;
    return (static_cast<size_t>(t) * static_cast<size_t>(trace_layers_) + static_cast<size_t>(tl)) *
           static_cast<size_t>(k_);
  }

  std::string source_;
  int n_expert_ = 0, k_ = 0, group_ = 1;
  int trace_layers_ = 0, trace_experts_ = 0, trace_top_k_ = 0;
  uint64_t n_tokens_ = 0, skipped_ = 0;
  std::vector<int32_t> experts_;  // [token][trace layer][k]
  std::vector<float> weights_;    // same shape
};

// One trace record's experts/weights mapped as described above (exposed for
// tests and cache-sim): fills `experts` and `weights` with exactly k entries.
void map_route_record(const RouteRecord& r, int n_expert, int k, std::vector<int32_t>& experts,
                      std::vector<float>& weights);

}  // namespace sluice::moe
