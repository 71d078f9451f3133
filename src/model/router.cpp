#include "model/router.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "util/error.h"

namespace sluice::model {

namespace {

// llama.cpp clamps the sum away from 0 before dividing.
constexpr float kMinWeightSum = 6.103515625e-5f;

// Indices of the k largest score[e] among the allowed ones (ties -> lower id), in that order.
void top_k_indices(const float* score, int n_expert, int k, std::vector<int32_t>& order) {
  order.resize(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  });
}

void renormalize(float* w, int k) {
  double wsum = 0.0;
  for (int s = 0; s < k; ++s) wsum += w[s];
  const float denom = std::max(static_cast<float>(wsum), kMinWeightSum);
  for (int s = 0; s < k; ++s) w[s] = w[s] / denom;
}

// Sorts the k slots by weight descending (ties -> lower id).
void sort_slots(int32_t* ex, float* w, int k) {
  std::vector<std::pair<float, int32_t>> v(static_cast<size_t>(k));
  for (int s = 0; s < k; ++s) v[s] = {w[s], ex[s]};
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (int s = 0; s < k; ++s) {
    w[s] = v[s].first;
    ex[s] = v[s].second;
  }
}

// Masks (to -inf) the experts outside the n_used best groups of `score`.
void limit_groups(float* score, int n_expert, uint32_t n_group, uint32_t n_used) {
  const int per = n_expert / static_cast<int>(n_group);
  std::vector<float> gscore(n_group);
  for (uint32_t g = 0; g < n_group; ++g) {
    float best = -INFINITY, second = -INFINITY;
    for (int e = static_cast<int>(g) * per; e < static_cast<int>(g + 1) * per; ++e) {
      if (score[e] > best) {
        second = best;
        best = score[e];
      } else if (score[e] > second) {
        second = score[e];
      }
    }
    gscore[g] = per >= 2 ? best + second : best;
  }
  std::vector<int32_t> order;
  top_k_indices(gscore.data(), static_cast<int>(n_group), static_cast<int>(n_used), order);
  std::vector<uint8_t> keep(n_group, 0);
  for (uint32_t i = 0; i < n_used; ++i) keep[order[i]] = 1;
  for (uint32_t g = 0; g < n_group; ++g)
    if (!keep[g])
      for (int e = static_cast<int>(g) * per; e < static_cast<int>(g + 1) * per; ++e) score[e] = -INFINITY;
}

}  // namespace

float sqrt_softplus(float x) { return std::sqrt(x > 20.0f ? x : std::log(1.0f + std::exp(x))); }

void route_by_token(const RouterDesc& router, const int32_t* table, const int32_t* tokens, const float* logits,
                    int n_tokens, int n_expert, int k, Routing& out) {
  out.n_tokens = n_tokens;
  out.k = k;
  out.experts.assign(static_cast<size_t>(n_tokens) * k, 0);
  out.weights.assign(static_cast<size_t>(n_tokens) * k, 0.0f);
  for (int t = 0; t < n_tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    int32_t* ex = &out.experts[static_cast<size_t>(t) * k];
    float* w = &out.weights[static_cast<size_t>(t) * k];
    const int32_t* row = table + static_cast<int64_t>(tokens[t]) * k;
    for (int s = 0; s < k; ++s) {
      ex[s] = row[s];
      w[s] = sqrt_softplus(l[row[s]]);
    }
    if (router.normalize) renormalize(w, k);
    sort_slots(ex, w, k);
  }
}

void route_topk(const RouterDesc& router, const float* selection_bias, const float* logits, int n_tokens,
                int n_expert, int k, Routing& out) {
  out.n_tokens = n_tokens;
  out.k = k;
  out.experts.assign(static_cast<size_t>(n_tokens) * k, 0);
  out.weights.assign(static_cast<size_t>(n_tokens) * k, 0.0f);
  std::vector<float> prob(static_cast<size_t>(n_expert)), score(static_cast<size_t>(n_expert));
  std::vector<int32_t> order;
  for (int t = 0; t < n_tokens; ++t) {
    const float* l = logits + static_cast<int64_t>(t) * n_expert;
    int32_t* ex = &out.experts[static_cast<size_t>(t) * k];
    float* w = &out.weights[static_cast<size_t>(t) * k];
    switch (router.kind) {
      case RouterKind::SoftmaxAll: {
        float mx = -INFINITY;
        for (int e = 0; e < n_expert; ++e) mx = std::max(mx, l[e]);
        double sum = 0.0;
        for (int e = 0; e < n_expert; ++e) {
          prob[e] = std::exp(l[e] - mx);
          sum += prob[e];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int e = 0; e < n_expert; ++e) prob[e] *= inv;
        top_k_indices(prob.data(), n_expert, k, order);
        for (int s = 0; s < k; ++s) {
          ex[s] = order[s];
          w[s] = prob[order[s]];
        }
        if (router.normalize) renormalize(w, k);
        break;
      }
      case RouterKind::SoftmaxSelected: {
        top_k_indices(l, n_expert, k, order);  // descending logits: already slot order
        const float mx = l[order[0]];
        double sum = 0.0;
        for (int s = 0; s < k; ++s) {
          ex[s] = order[s];
          w[s] = std::exp(l[order[s]] - mx);
          sum += w[s];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int s = 0; s < k; ++s) w[s] *= inv;
        break;
      }
      case RouterKind::SigmoidBiased:
      case RouterKind::SqrtSoftplus: {
        // Weights from the gate function; selection by weight + bias, within
        // the best groups where the router has them (sigmoid: DeepSeek V3,
        // GLM; sqrt-softplus: DeepSeek V4).
        const bool sigmoid = router.kind == RouterKind::SigmoidBiased;
        for (int e = 0; e < n_expert; ++e) {
          prob[e] = sigmoid ? 1.0f / (1.0f + std::exp(-l[e])) : sqrt_softplus(l[e]);
          score[e] = prob[e] + (selection_bias ? selection_bias[e] : 0.0f);
        }
        if (sigmoid && router.n_group_used > 0 && router.n_group_used < router.n_group)
          limit_groups(score.data(), n_expert, router.n_group, router.n_group_used);
        top_k_indices(score.data(), n_expert, k, order);
        for (int s = 0; s < k; ++s) {
          ex[s] = order[s];
          w[s] = prob[order[s]];
        }
        if (router.normalize) renormalize(w, k);
        sort_slots(ex, w, k);
        break;
      }
      case RouterKind::HashSqrtSoftplus:
        throw Error("internal: hash routing needs the token ids (route_by_token)");
    }
  }
}

moe::TrimStats route_layer(const RouterDesc& router, const float* selection_bias, const float* logits, int n_tokens,
                           int n_expert, int k, const moe::TrimConfig& trims, const moe::ExpertCachedFn& is_cached,
                           Routing& dense, moe::RoutingTable& out, RouteDrops* drops) {
  route_topk(router, selection_bias, logits, n_tokens, n_expert, k, dense);
  return trim_routing(dense, trims, is_cached, out, drops);
}

moe::TrimStats trim_routing(const Routing& dense, const moe::TrimConfig& trims, const moe::ExpertCachedFn& is_cached,
                            moe::RoutingTable& out, RouteDrops* drops) {
  const int n_tokens = dense.n_tokens, k = dense.k;
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
