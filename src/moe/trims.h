// Routing trims: pure functions over one layer's routing table that trade
// output quality for expert I/O. The model calls them after top-k selection.
//
// Order (each step sees the previous one's output):
//   1. top-k       — during selection: select_top_k / route_top_k with
//                    effective_top_k(cfg, model_k, n_expert).
//   2. top-p       — per position, keep the shortest weight-sorted prefix whose
//                    renormalised mass reaches P (at least one expert).
//   3. budget      — per layer and ubatch, keep the N distinct experts with the
//                    largest summed gate weight; drop the rest everywhere.
//   4. drop-cold   — skip cache-missing experts whose renormalised weight is
//                    below W; a position's first (largest) expert is never dropped.
// apply_trims runs 2-4.
//
// Renormalisation: only when the model renormalises its top-k (cfg.normalize),
// only for positions that actually lost an expert (so no-op settings leave a
// table bit-identical), and with the same arithmetic as the router (double sum,
// float divisor clamped to >= 2^-14, as llama.cpp does). drop-cold
// renormalises only when cfg.drop_renorm as well.
//
// A position that loses all its experts to the budget keeps an EMPTY row: it
// gets no routed-expert contribution in that layer (a shared expert, if the
// model has one, still applies). Forcing its top-1 back in would break the
// budget, which is an I/O cap; TrimStats::positions_emptied counts these.
//
// Thread-safety: none of these functions keep state; concurrent calls on
// different tables are safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "moe/trim_config.h"

namespace sluice::moe {

struct ExpertWeight {
  int32_t expert = 0;
  float weight = 0.0f;
  friend bool operator==(const ExpertWeight&, const ExpertWeight&) = default;
};

// One layer's routing for a batch of positions. Each position holds up to
// `capacity` (expert, weight) entries with distinct expert ids >= 0, finite
// weights, sorted by weight descending (the router puts the lower id first on
// a tie). Rows are stored flat, so a table costs two allocations.
class RoutingTable {
 public:
  RoutingTable() = default;
  RoutingTable(int n_positions, int capacity);  // every row empty

  // Builds a table from rows; throws sluice::Error when a row breaks the invariants.
  static RoutingTable from_rows(const std::vector<std::vector<ExpertWeight>>& rows);
  // From the router's dense layout: experts/weights are [n_positions][k].
  static RoutingTable from_dense(const int32_t* experts, const float* weights, int n_positions, int k);

  int n_positions() const { return n_positions_; }
  int capacity() const { return capacity_; }
  std::span<const ExpertWeight> row(int pos) const;
  int64_t total_entries() const;

  // Replaces a row; throws sluice::Error when it breaks the invariants.
  void set_row(int pos, std::span<const ExpertWeight> entries);
  // Removes the entries for which keep(entry, slot) is false, preserving order.
  // Returns how many were removed.
  int retain(int pos, const std::function<bool(const ExpertWeight&, int slot)>& keep);
  // Scales a row to sum to 1, with the router's arithmetic (see top of file).
  void renormalize(int pos);

  // Same positions with the same rows, bit for bit (capacity is not compared).
  friend bool operator==(const RoutingTable& a, const RoutingTable& b);

 private:
  ExpertWeight* slots(int pos) { return slots_.data() + static_cast<size_t>(pos) * capacity_; }
  void check_pos(int pos) const;

  int n_positions_ = 0;
  int capacity_ = 0;
  std::vector<ExpertWeight> slots_;  // [n_positions][capacity]
  std::vector<int> count_;           // live entries per row
};

// Top-k of one position's router probabilities (n_expert values, already
// softmaxed or sigmoided — selection and weights use them as given). Ties go
// to the lower expert id; output is sorted by weight descending. With
// `normalize` the k weights are scaled to sum to 1 (router arithmetic).
// `out` is reused to avoid allocation. Throws sluice::Error for k outside
// 1..n_expert or a NaN probability.
void select_top_k(std::span<const float> probs, int k, bool normalize, std::vector<ExpertWeight>& out);

// select_top_k for every position of probs[n_positions][n_expert].
RoutingTable route_top_k(const float* probs, int n_positions, int n_expert, int k, bool normalize);

// Counters of experts (table entries), summed over positions and layers.
// For every position: routed == kept + dropped_by_top_p + dropped_by_budget + dropped_by_cold.
struct TrimStats {
  int64_t positions = 0;
  int64_t routed = 0;  // entries entering the trims (after top-k selection)
  int64_t kept = 0;
  int64_t dropped_by_top_p = 0;
  int64_t dropped_by_budget = 0;
  int64_t dropped_by_cold = 0;
  int64_t positions_emptied = 0;  // positions left with no expert (budget)

  int64_t dropped() const { return dropped_by_top_p + dropped_by_budget + dropped_by_cold; }
  TrimStats& operator+=(const TrimStats& o);
  friend bool operator==(const TrimStats&, const TrimStats&) = default;
};

// Whether an expert of this layer is resident (a cache hit). Called only for
// drop-cold candidates; must not modify the table.
using ExpertCachedFn = std::function<bool(int32_t expert)>;

// Each trim returns the number of entries it removed from each position
// (size n_positions). Values outside the "on" range make a trim a no-op:
// top_p >= 1, budget <= 0, drop_cold <= 0.
std::vector<int> trim_top_p(RoutingTable& table, float top_p, bool normalize);
std::vector<int> trim_expert_budget(RoutingTable& table, int budget, bool normalize);
std::vector<int> trim_drop_cold(RoutingTable& table, float threshold, bool renormalize,
                                const ExpertCachedFn& is_cached);

// Runs top-p, budget and drop-cold in that order. is_cached is needed only when
// cfg.drop_cold > 0 (sluice::Error otherwise). When per_position is non-null it
// receives one TrimStats per position (positions == 1 each).
TrimStats apply_trims(RoutingTable& table, const TrimConfig& cfg, const ExpertCachedFn& is_cached = {},
                      std::vector<TrimStats>* per_position = nullptr);

// The distinct experts of one layer's table, for reading each expert once in a
// batched prefill: sorted by expert id ascending; each lists its uses in
// position order, and total_weight is their weight sum (double, position order).
struct ExpertUse {
  int position = 0;
  int slot = 0;
  float weight = 0.0f;
};
struct DistinctExpert {
  int32_t expert = 0;
  double total_weight = 0.0;
  std::vector<ExpertUse> uses;
};
std::vector<DistinctExpert> expert_union(const RoutingTable& table);

}  // namespace sluice::moe
