// Expert routing as llama.cpp's build_moe_ffn does it, for every RouterKind
// (model/arch.h):
//  SoftmaxAll      probabilities = softmax over ALL expert logits; the k most
//                  probable are chosen; optionally renormalised to sum to 1
//                  (qwen3moe's norm_topk_prob, Mixtral's softmax over the top-k).
//  SoftmaxSelected the k largest raw logits are chosen; weights = softmax over
//                  those k logits (gpt-oss).
//  SigmoidBiased   p = sigmoid(logit); selection by p + selection_bias[e],
//                  optionally only within the n_group_used best groups (a
//                  group's score: the sum of its two best biased scores); the
//                  weights are the UNBIASED p of the chosen, optionally
//                  renormalised (glm4moe, DeepSeek-V3).
//  SqrtSoftplus    as SigmoidBiased with sqrt(softplus(logit)) for the sigmoid
//                  and no groups (DeepSeek V4); HashSqrtSoftplus: route_by_token.
// Ties go to the lower expert id. Slot order is descending weight (ties: lower
// id), and the MoE output is accumulated in this slot order. weights_scale is
// not applied here (MoeFfn scales the routed sum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/arch.h"
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

// sqrt(softplus(x)) as ggml computes it (softplus(x) = x above 20).
float sqrt_softplus(float x);

// HashSqrtSoftplus: token t's experts are row tokens[t] of `table` ({k, n_vocab}
// I32, ids checked by the caller), weighted by their sqrt-softplus scores of
// `logits` (renormalised when router.normalize); slots as route_topk's.
void route_by_token(const RouterDesc& router, const int32_t* table, const int32_t* tokens, const float* logits,
                    int n_tokens, int n_expert, int k, Routing& out);

// logits: n_tokens rows of n_expert router logits (any logit bias already
// added). selection_bias: n_expert floats (SigmoidBiased; null = zeros).
void route_topk(const RouterDesc& router, const float* selection_bias, const float* logits, int n_tokens,
                int n_expert, int k, Routing& out);

// One MoE layer's routing for one ubatch, as the model uses it: route_topk
// with k already resolved (moe::effective_top_k), then moe::apply_trims with
// `trims` (top-p -> budget -> drop-cold) when any table trim is on. Rows of
// `out` may be shorter than k, or empty. With no table trim the table holds
// exactly route_topk's result, bit for bit. `dense` is scratch.
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

moe::TrimStats route_layer(const RouterDesc& router, const float* selection_bias, const float* logits, int n_tokens, int n_expert, int k, const moe::TrimConfig& trims,
                           const moe::ExpertCachedFn& is_cached, Routing& dense, moe::RoutingTable& out,
                           RouteDrops* drops = nullptr);

// route_layer's second half: `out` from a filled `dense` table (route_topk's,
// or a replayed one: moe/route_replay.h), then the trims as route_layer applies them.
moe::TrimStats trim_routing(const Routing& dense, const moe::TrimConfig& trims, const moe::ExpertCachedFn& is_cached,
                            moe::RoutingTable& out, RouteDrops* drops = nullptr);

}  // namespace sluice::model
