#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sluice::runtime {

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) return -1;
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

Sampler::Sampler(const SamplerConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {}

double TokenDist::prob(int32_t id) const {
  if (total <= 0) return 0;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == id) return w[i] / total;
  return 0;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const int32_t id = allowed_ ? sample_constrained(logits, history) : draw(distribution(logits, history));
  if (observe_ && id >= 0) observe_(logits, id);
  return id;
}

int32_t Sampler::sample_constrained(std::span<const float> logits, std::span<const int32_t> history) {
  TokenDist d = distribution(logits, history);
  // Rejection: a refused token leaves the distribution, the rest keep their
  // relative weights, so the accepted draw follows the masked distribution.
  for (int rejected = 0; rejected < kMaxRejections && !d.ids.empty() && d.total > 0; ++rejected) {
    const int32_t x = draw(d);
    if (x < 0) break;
    if (allowed_(x)) return x;
    for (size_t i = 0; i < d.ids.size(); ++i) {
      if (d.ids[i] != x) continue;
      d.total -= d.w[i];
      d.ids.erase(d.ids.begin() + static_cast<std::ptrdiff_t>(i));
      d.w.erase(d.w.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    if (d.ids.empty()) break;
    // Recompute the sum: repeated subtraction could drift below the weights left.
    d.total = 0;
    for (double v : d.w) d.total += v;
  }
  // The kept candidates are exhausted (or refused too often): the most
  // likely allowed token of the whole vocabulary (work_ holds the penalised
  // logits distribution() used). For greedy this is exactly the masked argmax.
  ids_.resize(work_.size());
  std::iota(ids_.begin(), ids_.end(), 0);
  std::sort(ids_.begin(), ids_.end(),
            [&](int32_t a, int32_t b) { return work_[a] != work_[b] ? work_[a] > work_[b] : a < b; });
  for (int32_t id : ids_)
    if (allowed_(id)) return id;
  return -1;
}

TokenDist Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history) {
  TokenDist d;
  const int n = static_cast<int>(logits.size());
  if (n == 0) return d;
  work_.assign(logits.begin(), logits.end());
  if (cfg_.repeat_penalty != 1.0f && cfg_.repeat_last_n != 0) {
    const size_t window = cfg_.repeat_last_n < 0 ? history.size()
                                                 : std::min(history.size(), static_cast<size_t>(cfg_.repeat_last_n));
    std::vector<int32_t> recent(history.end() - static_cast<std::ptrdiff_t>(window), history.end());
    std::sort(recent.begin(), recent.end());
    recent.erase(std::unique(recent.begin(), recent.end()), recent.end());
    for (int32_t id : recent) {
      if (id < 0 || id >= n) continue;
      work_[id] = work_[id] > 0 ? work_[id] / cfg_.repeat_penalty : work_[id] * cfg_.repeat_penalty;
    }
  }
  if (cfg_.temperature <= 0.0f) {
    d.ids = {argmax(work_)};
    d.w = {1.0};
    d.total = 1.0;
    return d;
  }

  // Candidates sorted by logit (descending, ties -> lower id), cut to top-k.
  ids_.resize(static_cast<size_t>(n));
  std::iota(ids_.begin(), ids_.end(), 0);
  const int k = cfg_.top_k > 0 ? std::min(cfg_.top_k, n) : n;
  auto by_logit = [&](int32_t a, int32_t b) { return work_[a] != work_[b] ? work_[a] > work_[b] : a < b; };
  std::partial_sort(ids_.begin(), ids_.begin() + k, ids_.end(), by_logit);
  ids_.resize(static_cast<size_t>(k));

  std::vector<double> p(ids_.size());
  const double mx = work_[ids_[0]];
  double sum = 0;
  for (size_t i = 0; i < ids_.size(); ++i) {
    p[i] = std::exp((work_[ids_[i]] - mx) / cfg_.temperature);
    sum += p[i];
  }
  for (double& v : p) v /= sum;

  size_t keep = ids_.size();
  if (cfg_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += p[i];
      if (cum >= cfg_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (cfg_.min_p > 0.0f) {
    const double floor = p[0] * cfg_.min_p;
    size_t i = 1;
    while (i < keep && p[i] >= floor) ++i;
    keep = i;
  }
  d.ids.assign(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(keep));
  d.w.assign(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep));
  for (size_t i = 0; i < keep; ++i) d.total += p[i];
  return d;
}

int32_t Sampler::draw(const TokenDist& d) {
  if (d.ids.empty()) return -1;
  if (d.ids.size() == 1) {
    if (cfg_.temperature <= 0.0f) return d.ids[0];  // greedy: no randomness
  }
  std::uniform_real_distribution<double> uni(0.0, d.total);
  const double r = uni(rng_);
  double cum = 0;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    cum += d.w[i];
    if (r < cum) return d.ids[i];
  }
  return d.ids.back();
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::accept_or_resample(const TokenDist& p, const TokenDist& q, int32_t x, bool& accepted) {
  if (cfg_.temperature <= 0.0f) {
    accepted = !p.ids.empty() && p.ids[0] == x;
    return accepted ? x : (p.ids.empty() ? -1 : p.ids[0]);
  }
  const double px = p.prob(x), qx = q.prob(x);
  if (qx > 0 && (px >= qx || uniform() < px / qx)) {
    accepted = true;
    return x;
  }
  accepted = false;
  // Residual: max(0, p - q), renormalised; p's support is all it can hold.
  TokenDist r;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double v = p.w[i] / p.total - q.prob(p.ids[i]);
    if (v > 0) {
      r.ids.push_back(p.ids[i]);
      r.w.push_back(v);
      r.total += v;
    }
  }
  return r.ids.empty() ? draw(p) : draw(r);
}

}  // namespace sluice::runtime
