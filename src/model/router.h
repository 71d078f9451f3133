// Expert routing as llama.cpp's build_moe_ffn does it with softmax gating:
// probabilities = softmax over ALL expert logits; the k most probable experts
// are chosen (ties -> lower expert id); their probabilities are renormalised to
// sum to 1 (qwen3moe's norm_topk_prob, and Mixtral's softmax-over-top-k).
// Slot order is descending probability, and the MoE output is accumulated in
// this slot order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "moe/trims.h"

namespace sluice::model {

struct Routing {
  int n_tokens = 0;
  int k = 0;
  std::vector<int32_t> experts;  // [n_tokens][k]
  std::vector<float> weights;    // [n_tokens][k]

  int32_t expert(int t, int slot) const { return experts[static_cast<size_t>(t) * k + slot]; }
  float weight(int t, int slot) const { return weights[static_cast<size_t>(t) * k + slot]; }
};

// logits: n_tokens rows of n_expert router logits.
void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, bool renormalize, Routing& out);

// One MoE layer's routing for one ubatch, as the model uses it: softmax top-k
// with k already resolved (moe::effective_top_k), then moe::apply_trims with
// `trims` (top-p -> budget -> drop-cold) when any table trim is on. Rows of
// `out` may be shorter than k, or empty. With no table trim the table holds
// exactly route_softmax_topk's result, bit for bit. `dense` is scratch.
// Returns this call's trim counters (routed == kept when no trim is on).
// is_cached is needed only for drop-cold (Error otherwise).
// Distinct experts of one layer's batch removed by the trims, attributed to the
// trim that removed an expert's last use (top-p, then budget, then drop-cold).
// `experts` lists them (ascending id). Filled by route_layer.
struct RouteDrops {
  uint64_t top_p = 0, budget = 0, cold = 0;
  std::vector<int32_t> experts;
  uint64_t total() const { return top_p + budget + cold; }
};

moe::TrimStats route_layer(const float* logits, int n_tokens, int n_expert, int k, const moe::TrimConfig& trims,
                           const moe::ExpertCachedFn& is_cached, Routing& dense, moe::RoutingTable& out,
                           RouteDrops* drops = nullptr);

}  // namespace sluice::model
