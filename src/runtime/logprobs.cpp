#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sluice::runtime {

TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int n_top) {
  // log_softmax(x)_i = x_i - max - log(sum exp(x_j - max)).
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double log_z = static_cast<double>(mx) + std::log(sum);
  auto lp = [&](int32_t i) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(i)]) - log_z);
  };

  TokenLogprob t;
  t.id = id;
  t.logprob = lp(id);
  const int n = std::clamp(n_top, 0, std::min(kMaxTopLogprobs, static_cast<int>(logits.size())));
  if (n == 0) return t;
  // The n best ids: a bounded selection, one pass over the row.
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(n) + 1);
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    if (static_cast<int>(best.size()) == n && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (static_cast<int>(best.size()) > n) best.pop_back();
  }
  for (int32_t i : best) t.top.emplace_back(i, lp(i));
  return t;
}

}  // namespace sluice::runtime
