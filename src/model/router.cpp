#include "model/router.h"

#include <algorithm>
#include <cmath>
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
                           const moe::ExpertCachedFn& is_cached, Routing& dense, moe::RoutingTable& out) {
  route_softmax_topk(logits, n_tokens, n_expert, k, trims.normalize, dense);
  out = moe::RoutingTable::from_dense(dense.experts.data(), dense.weights.data(), n_tokens, k);
  if (trims.any_table_trim()) return moe::apply_trims(out, trims, is_cached);
  moe::TrimStats st;
  st.positions = n_tokens;
  st.routed = st.kept = static_cast<int64_t>(n_tokens) * k;
  return st;
}

}  // namespace sluice::model
