#include "moe/prediction_order.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "util/error.h"

namespace sluice::moe {

std::vector<PredictedExpert> order_predictions(std::span<const int32_t> rows, int depth) {
  if (depth < 1 || rows.size() % static_cast<size_t>(depth) != 0)
    throw Error("prefetch: " + std::to_string(rows.size()) + " predicted experts do not make rows of depth " +
                std::to_string(depth));
  struct Rank {
    int best_slot;
    int uses;
  };
  std::unordered_map<int32_t, Rank> ranks;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int slot = static_cast<int>(i % static_cast<size_t>(depth));
    auto [it, fresh] = ranks.try_emplace(rows[i], Rank{slot, 0});
    it->second.best_slot = std::min(it->second.best_slot, slot);
    it->second.uses += 1;
  }
  std::vector<std::pair<int32_t, Rank>> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.best_slot != b.second.best_slot) return a.second.best_slot < b.second.best_slot;
    if (a.second.uses != b.second.uses) return a.second.uses > b.second.uses;
    return a.first < b.first;
  });
  std::vector<PredictedExpert> out;
  out.reserve(sorted.size());
  for (const auto& [e, r] : sorted) out.push_back({e, r.uses});
  return out;
}

}  // namespace sluice::moe
