#include "moe/route_replay.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "util/error.h"

namespace sluice::moe {

void map_route_record(const RouteRecord& r, int n_expert, int k, std::vector<int32_t>& experts,
                      std::vector<float>& weights) {
  const int kt = static_cast<int>(r.experts.size());
  const int m = (k + kt - 1) / kt;
  experts.clear();
  weights.clear();
  for (int i = 0; i < kt && static_cast<int>(experts.size()) < k; ++i) {
    const float w = (r.weights.empty() ? 1.0f / static_cast<float>(kt) : r.weights[static_cast<size_t>(i)]) /
                    static_cast<float>(m);
    for (int j = 0; j < m && static_cast<int>(experts.size()) < k; ++j) {
      int32_t id = static_cast<int32_t>((static_cast<int64_t>(r.experts[static_cast<size_t>(i)]) * m + j) % n_expert);
      // Fewer model experts than E_trace*m: fold, then probe to a free id.
      while (std::find(experts.begin(), experts.end(), id) != experts.end()) id = (id + 1) % n_expert;
      experts.push_back(id);
      weights.push_back(w);
    }
  }
  const float sum = std::accumulate(weights.begin(), weights.end(), 0.0f);
  if (sum > 0.0f) {
    for (float& w : weights) w /= sum;
  } else {
    for (float& w : weights) w = 1.0f / static_cast<float>(weights.size());
  }
  std::vector<int> order(experts.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (weights[a] != weights[b]) return weights[a] > weights[b];
    return experts[a] < experts[b];
  });
  std::vector<int32_t> e2;
  std::vector<float> w2;
  for (int i : order) {
    e2.push_back(experts[static_cast<size_t>(i)]);
    w2.push_back(weights[static_cast<size_t>(i)]);
  }
  experts.swap(e2);
  weights.swap(w2);
}

RouteReplay::RouteReplay(const RouteTrace& trace, int n_expert, int top_k)
    : source_(trace.source), n_expert_(n_expert), k_(top_k) {
  if (top_k < 1 || n_expert < top_k) {
    throw Error("--route-replay " + trace.source + ": the model routes " + std::to_string(top_k) + " of " +
                std::to_string(n_expert) + " experts; nothing to replay onto");
  }
  trace_layers_ = trace.n_layers();
  trace_experts_ = trace.n_expert();
  trace_top_k_ = trace.max_top_k();
  group_ = (k_ + trace_top_k_ - 1) / std::max(trace_top_k_, 1);
  const size_t L = static_cast<size_t>(trace_layers_);
  std::vector<const RouteRecord*> token(L, nullptr);
  std::vector<int32_t> ex;
  std::vector<float> w;
  auto flush = [&] {
    const bool complete = std::all_of(token.begin(), token.end(), [](const RouteRecord* r) { return r != nullptr; });
    const bool any = std::any_of(token.begin(), token.end(), [](const RouteRecord* r) { return r != nullptr; });
    if (complete) {
      for (const RouteRecord* r : token) {
        map_route_record(*r, n_expert_, k_, ex, w);
        experts_.insert(experts_.end(), ex.begin(), ex.end());
        weights_.insert(weights_.end(), w.begin(), w.end());
      }
      ++n_tokens_;
    } else if (any) {
      ++skipped_;
    }
    std::fill(token.begin(), token.end(), nullptr);
  };
  const RouteRecord* prev = nullptr;
  for (const RouteRecord& r : trace.records) {
    if (prev && (r.seq != prev->seq || r.pos != prev->pos)) flush();
    token[static_cast<size_t>(r.layer)] = &r;  // a repeated (token, layer): the last record wins
    prev = &r;
  }
  flush();
  if (n_tokens_ == 0) {
    throw Error("--route-replay " + trace.source + ": no token has a record for every one of its " +
                std::to_string(trace_layers_) + " layers");
  }
}

std::string RouteReplay::describe() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "route replay: %s (%llu tokens, %llu incomplete skipped; %d layers, top-%d of %d experts) -> "
                "model layer l replays trace layer l mod %d, trace expert e -> experts e*%d..e*%d+%d mod %d, "
                "top-%d",
                source_.c_str(), static_cast<unsigned long long>(n_tokens_),
                static_cast<unsigned long long>(skipped_), trace_layers_, trace_top_k_, trace_experts_,
                trace_layers_, group_, group_, group_ - 1, n_expert_, k_);
  return buf;
}

}  // namespace sluice::moe
