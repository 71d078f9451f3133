#include "moe/trims.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "util/error.h"

namespace sluice::moe {
namespace {

// Float slack for "renormalised mass reaches P": a prefix whose mass is P up to
// rounding of the float weights must count as reaching it.
constexpr double kTopPEpsilon = 1e-6;
// The router's divisor floor (llama.cpp clamps the top-k sum to 2^-14).
constexpr float kMinRenormDivisor = 6.103515625e-5f;

double row_sum(std::span<const ExpertWeight> row) {
  double sum = 0.0;
  for (const auto& e : row) sum += e.weight;
  return sum;
}

}  // namespace

// ---- RoutingTable ----------------------------------------------------------

RoutingTable::RoutingTable(int n_positions, int capacity) : n_positions_(n_positions), capacity_(capacity) {
  if (n_positions < 0 || capacity < 0)
    fail("routing table", "negative size " + std::to_string(n_positions) + "x" + std::to_string(capacity));
  slots_.resize(static_cast<size_t>(n_positions) * static_cast<size_t>(capacity));
  count_.assign(static_cast<size_t>(n_positions), 0);
}

RoutingTable RoutingTable::from_rows(const std::vector<std::vector<ExpertWeight>>& rows) {
  size_t cap = 0;
  for (const auto& r : rows) cap = std::max(cap, r.size());
  RoutingTable t(static_cast<int>(rows.size()), static_cast<int>(cap));
  for (size_t p = 0; p < rows.size(); ++p) t.set_row(static_cast<int>(p), rows[p]);
  return t;
}

RoutingTable RoutingTable::from_dense(const int32_t* experts, const float* weights, int n_positions, int k) {
  RoutingTable t(n_positions, k);
  std::vector<ExpertWeight> row(static_cast<size_t>(k));
  for (int p = 0; p < n_positions; ++p) {
    for (int s = 0; s < k; ++s) {
      const size_t i = static_cast<size_t>(p) * k + s;
      row[s] = {experts[i], weights[i]};
    }
    t.set_row(p, row);
  }
  return t;
}

void RoutingTable::check_pos(int pos) const {
  if (pos < 0 || pos >= n_positions_)
    fail("routing table", "position " + std::to_string(pos) + " outside 0.." + std::to_string(n_positions_ - 1));
}

std::span<const ExpertWeight> RoutingTable::row(int pos) const {
  check_pos(pos);
  return {slots_.data() + static_cast<size_t>(pos) * capacity_, static_cast<size_t>(count_[pos])};
}

bool operator==(const RoutingTable& a, const RoutingTable& b) {
  if (a.n_positions_ != b.n_positions_) return false;
  for (int p = 0; p < a.n_positions_; ++p) {
    const auto ra = a.row(p), rb = b.row(p);
    if (!std::equal(ra.begin(), ra.end(), rb.begin(), rb.end())) return false;
  }
  return true;
}

int64_t RoutingTable::total_entries() const { return std::accumulate(count_.begin(), count_.end(), int64_t{0}); }

void RoutingTable::set_row(int pos, std::span<const ExpertWeight> entries) {
  check_pos(pos);
  const std::string where = "routing table position " + std::to_string(pos);
  if (entries.size() > static_cast<size_t>(capacity_))
    fail(where, std::to_string(entries.size()) + " experts exceed capacity " + std::to_string(capacity_));
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (e.expert < 0) fail(where, "negative expert id " + std::to_string(e.expert));
    if (!std::isfinite(e.weight)) fail(where, "expert " + std::to_string(e.expert) + " has a non-finite weight");
    if (i > 0 && entries[i - 1].weight < e.weight) fail(where, "weights are not sorted in descending order");
    for (size_t j = 0; j < i; ++j)
      if (entries[j].expert == e.expert) fail(where, "expert " + std::to_string(e.expert) + " appears twice");
  }
  std::copy(entries.begin(), entries.end(), slots(pos));
  count_[pos] = static_cast<int>(entries.size());
}

int RoutingTable::retain(int pos, const std::function<bool(const ExpertWeight&, int)>& keep) {
  check_pos(pos);
  ExpertWeight* r = slots(pos);
  const int n = count_[pos];
  int out = 0;
  for (int s = 0; s < n; ++s)
    if (keep(r[s], s)) r[out++] = r[s];
  count_[pos] = out;
  return n - out;
}

void RoutingTable::renormalize(int pos) {
  check_pos(pos);
  ExpertWeight* r = slots(pos);
  const int n = count_[pos];
  const float denom = std::max(static_cast<float>(row_sum({r, static_cast<size_t>(n)})), kMinRenormDivisor);
  for (int s = 0; s < n; ++s) r[s].weight = r[s].weight / denom;
}

// ---- top-k selection ---------------------------------------------------------

void select_top_k(std::span<const float> probs, int k, bool normalize, std::vector<ExpertWeight>& out) {
  const int n_expert = static_cast<int>(probs.size());
  if (k < 1 || k > n_expert)
    fail("MoE top-k", "k = " + std::to_string(k) + " is outside 1.." + std::to_string(n_expert));
  for (int e = 0; e < n_expert; ++e)
    if (std::isnan(probs[e])) fail("MoE router", "probability of expert " + std::to_string(e) + " is NaN");
  // Sorting ids (not values) keeps the tie rule explicit: equal probability -> lower id first.
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[a] != probs[b] ? probs[a] > probs[b] : a < b;
  });
  out.resize(static_cast<size_t>(k));
  for (int s = 0; s < k; ++s) out[s] = {order[s], probs[order[s]]};
  if (normalize) {
    const float denom = std::max(static_cast<float>(row_sum(out)), kMinRenormDivisor);
    for (auto& e : out) e.weight = e.weight / denom;
  }
}

RoutingTable route_top_k(const float* probs, int n_positions, int n_expert, int k, bool normalize) {
  RoutingTable t(n_positions, k);
  std::vector<ExpertWeight> row;
  for (int p = 0; p < n_positions; ++p) {
    select_top_k({probs + static_cast<size_t>(p) * n_expert, static_cast<size_t>(n_expert)}, k, normalize, row);
    t.set_row(p, row);
  }
  return t;
}

// ---- trims -----------------------------------------------------------------

std::vector<int> trim_top_p(RoutingTable& table, float top_p, bool normalize) {
  std::vector<int> removed(static_cast<size_t>(table.n_positions()), 0);
  if (!(top_p < 1.0f)) return removed;  // 1 (or NaN, rejected earlier) keeps everything
  for (int p = 0; p < table.n_positions(); ++p) {
    const auto row = table.row(p);
    if (row.size() <= 1) continue;
    const double total = row_sum(row);
    if (!(total > 0.0)) continue;  // no mass to measure: leave the row alone
    size_t keep = row.size();
    double cum = 0.0;
    for (size_t s = 0; s < row.size(); ++s) {
      cum += row[s].weight;
      if (cum / total >= static_cast<double>(top_p) - kTopPEpsilon) {
        keep = s + 1;
        break;
      }
    }
    if (keep == row.size()) continue;
    removed[p] = table.retain(p, [keep](const ExpertWeight&, int slot) { return static_cast<size_t>(slot) < keep; });
    if (normalize) table.renormalize(p);
  }
  return removed;
}

std::vector<int> trim_expert_budget(RoutingTable& table, int budget, bool normalize) {
  std::vector<int> removed(static_cast<size_t>(table.n_positions()), 0);
  if (budget <= 0) return removed;
  std::vector<DistinctExpert> experts = expert_union(table);
  if (experts.size() <= static_cast<size_t>(budget)) return removed;
  // Rank by aggregate weight; the lower id wins a tie, so the result never
  // depends on how the batch happens to be ordered.
  std::sort(experts.begin(), experts.end(), [](const DistinctExpert& a, const DistinctExpert& b) {
    return a.total_weight != b.total_weight ? a.total_weight > b.total_weight : a.expert < b.expert;
  });
  std::vector<int32_t> kept;
  for (int i = 0; i < budget; ++i) kept.push_back(experts[i].expert);
  std::sort(kept.begin(), kept.end());
  for (int p = 0; p < table.n_positions(); ++p) {
    removed[p] = table.retain(p, [&kept](const ExpertWeight& e, int) {
      return std::binary_search(kept.begin(), kept.end(), e.expert);
    });
    if (removed[p] > 0 && normalize && !table.row(p).empty()) table.renormalize(p);
  }
  return removed;
}

std::vector<int> trim_drop_cold(RoutingTable& table, float threshold, bool renormalize,
                                const ExpertCachedFn& is_cached) {
  std::vector<int> removed(static_cast<size_t>(table.n_positions()), 0);
  if (!(threshold > 0.0f)) return removed;
  if (!is_cached) fail(kFlagDropCold, "needs the expert cache's residency predicate");
  for (int p = 0; p < table.n_positions(); ++p) {
    const auto row = table.row(p);
    if (row.size() <= 1) continue;
    const double total = row_sum(row);  // every decision uses the row as it was
    if (!(total > 0.0)) continue;
    removed[p] = table.retain(p, [&](const ExpertWeight& e, int slot) {
      if (slot == 0) return true;  // the position's top-1 always stays
      if (e.weight / total >= static_cast<double>(threshold)) return true;
      return is_cached(e.expert);  // asked only for light experts
    });
    if (removed[p] > 0 && renormalize) table.renormalize(p);
  }
  return removed;
}

TrimStats& TrimStats::operator+=(const TrimStats& o) {
  positions += o.positions;
  routed += o.routed;
  kept += o.kept;
  dropped_by_top_p += o.dropped_by_top_p;
  dropped_by_budget += o.dropped_by_budget;
  dropped_by_cold += o.dropped_by_cold;
  positions_emptied += o.positions_emptied;
  return *this;
}

TrimStats apply_trims(RoutingTable& table, const TrimConfig& cfg, const ExpertCachedFn& is_cached,
                      std::vector<TrimStats>* per_position) {
  const int n = table.n_positions();
  std::vector<TrimStats> pos(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    pos[p].positions = 1;
    pos[p].routed = static_cast<int64_t>(table.row(p).size());
  }
  const auto by_top_p = trim_top_p(table, cfg.top_p, cfg.normalize);
  const auto by_budget = trim_expert_budget(table, cfg.expert_budget, cfg.normalize);
  const auto by_cold = trim_drop_cold(table, cfg.drop_cold, cfg.normalize && cfg.drop_renorm, is_cached);
  TrimStats total;
  for (int p = 0; p < n; ++p) {
    auto& s = pos[p];
    s.dropped_by_top_p = by_top_p[p];
    s.dropped_by_budget = by_budget[p];
    s.dropped_by_cold = by_cold[p];
    s.kept = static_cast<int64_t>(table.row(p).size());
    s.positions_emptied = (s.routed > 0 && s.kept == 0) ? 1 : 0;
    total += s;
  }
  if (per_position) *per_position = std::move(pos);
  return total;
}

// ---- union -------------------------------------------------------------------

std::vector<DistinctExpert> expert_union(const RoutingTable& table) {
  struct Entry {
    int32_t expert;
    int position;
    int slot;
    float weight;
  };
  std::vector<Entry> all;
  all.reserve(static_cast<size_t>(table.total_entries()));
  for (int p = 0; p < table.n_positions(); ++p) {
    const auto row = table.row(p);
    for (size_t s = 0; s < row.size(); ++s) all.push_back({row[s].expert, p, static_cast<int>(s), row[s].weight});
  }
  // Stable: each expert's uses stay in position order, so total_weight is summed
  // in a fixed order and is the same on every run.
  std::stable_sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return a.expert < b.expert; });
  std::vector<DistinctExpert> out;
  for (const auto& e : all) {
    if (out.empty() || out.back().expert != e.expert) out.push_back({e.expert, 0.0, {}});
    out.back().total_weight += e.weight;
    out.back().uses.push_back({e.position, e.slot, e.weight});
  }
  return out;
}

}  // namespace sluice::moe
