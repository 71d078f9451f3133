#include "model/router.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace sluice::model {

void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, bool renormalize, Routing& out) {
  out.n_tokens = n_tokens;
  out.k = k;
  out.experts.assign(static_cast<size_t>(n_tokens) * k, 0);
  out.weights.assign(static_cast<size_t>(n_tokens) * k, 0.0f);
  std::vector<float> prob(static_cast<size_t>(n_expert));
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int t = 0; t < n_tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    float mx = -INFINITY;
    for (int e = 0; e < n_expert; ++e) mx = std::max(mx, l[e]);
    double sum = 0.0;
    for (int e = 0; e < n_expert; ++e) {
      prob[e] = std::exp(l[e] - mx);
      sum += prob[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int e = 0; e < n_expert; ++e) prob[e] *= inv;

    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return prob[a] != prob[b] ? prob[a] > prob[b] : a < b;
    });
    int32_t* ex = &out.experts[static_cast<size_t>(t) * k];
    float* w = &out.weights[static_cast<size_t>(t) * k];
    double wsum = 0.0;
    for (int s = 0; s < k; ++s) {
      ex[s] = order[s];
      w[s] = prob[order[s]];
      wsum += w[s];
    }
    if (renormalize) {
      // llama.cpp clamps the sum away from 0 before dividing.
      const float denom = std::max(static_cast<float>(wsum), 6.103515625e-5f);
      for (int s = 0; s < k; ++s) w[s] = w[s] / denom;
    }
  }
}

moe::TrimStats route_layer(const float* logits, int n_tokens, int n_expert, int k, const moe::TrimConfig& trims,
                           const moe::ExpertCachedFn& is_cached, Routing& dense, moe::RoutingTable& out,
                           RouteDrops* drops) {
  route_softmax_topk(logits, n_tokens, n_expert, k, trims.normalize, dense);
  out = moe::RoutingTable::from_dense(dense.experts.data(), dense.weights.data(), n_tokens, k);
  if (drops) *drops = RouteDrops{};
  if (trims.any_table_trim()) {
    if (!drops) return moe::apply_trims(out, trims, is_cached);
    // The trims one at a time (same order and result as apply_trims) so each
    // distinct expert that leaves the batch is charged to the trim that removed it.
    auto distinct = [&out] {
      std::vector<int32_t> ids;
      for (const moe::DistinctExpert& d : moe::expert_union(out)) ids.push_back(d.expert);
      return ids;
    };
    std::vector<int32_t> before = distinct();
    const std::vector<int32_t> initial = before;
    moe::TrimStats total;
    uint64_t* charge[3] = {&drops->top_p, &drops->budget, &drops->cold};
    for (int stage = 0; stage < 3; ++stage) {
      moe::TrimConfig one = trims;
      if (stage != 0) one.top_p = 1.0f;
      if (stage != 1) one.expert_budget = 0;
      if (stage != 2) one.drop_cold = 0.0f;
      if (!one.any_table_trim()) continue;
      const moe::TrimStats st = moe::apply_trims(out, one, is_cached);
      if (total.positions == 0) {
        total = st;
      } else {  // same positions and entries: only the drops add up
        total.kept = st.kept;
        total.dropped_by_top_p += st.dropped_by_top_p;
        total.dropped_by_budget += st.dropped_by_budget;
        total.dropped_by_cold += st.dropped_by_cold;
        total.positions_emptied += st.positions_emptied;
      }
      const std::vector<int32_t> after = distinct();
      *charge[stage] += before.size() - after.size();
      before = after;
    }
    std::set_difference(initial.begin(), initial.end(), before.begin(), before.end(),
                        std::back_inserter(drops->experts));
    return total;
  }
  moe::TrimStats st;
  st.positions = n_tokens;
  st.routed = st.kept = static_cast<int64_t>(n_tokens) * k;
  return st;
}

}  // namespace sluice::model
