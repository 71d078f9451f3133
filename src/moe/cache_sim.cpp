#include "moe/cache_sim.h"

#include <algorithm>
#include <vector>

#include "moe/cache_budget.h"
#include "moe/expert_cache.h"
#include "util/error.h"

namespace sluice::moe {

namespace {

struct TraceShape {
  int n_layers = 0;
  int top_k = 0;
  int n_expert = 0;
  uint64_t tokens = 0;
};

TraceShape shape_of(std::span<const RouteTrace> traces) {
  TraceShape s;
  for (const RouteTrace& t : traces) {
    s.n_layers = std::max(s.n_layers, t.n_layers());
    s.top_k = std::max(s.top_k, t.max_top_k());
    s.n_expert = std::max(s.n_expert, t.n_expert());
    s.tokens += t.n_tokens();
  }
  return s;
}

// Runs every record through `cache` (ExpertCache or PartitionedExpertCache).
// Every expert is inserted at `expert_bytes`.
template <class Cache>
void replay(std::span<const RouteTrace> traces, Cache& cache, const CacheSimOptions& opt, uint64_t expert_bytes) {
  std::vector<ExpertCache::Pin> pins;
  bool first = true;
  for (const RouteTrace& t : traces) {
    int seq = 0;
    bool new_file = true;
    for (const RouteRecord& r : t.records) {
      if (!first && !opt.warm && (new_file || r.seq != seq)) cache.clear();
      first = false;
      new_file = false;
      seq = r.seq;
      // As ExpertStore::fetch does: look every expert up first (pinning the
      // hits), then insert the misses once "read" — so a miss never evicts an
      // expert this same layer is about to use.
      for (int e : r.experts) pins.push_back(cache.acquire({r.layer, e}));
      for (size_t i = 0; i < pins.size(); ++i) {
        if (!pins[i]) pins[i] = cache.insert({r.layer, r.experts[i]}, expert_bytes);
      }
      pins.clear();  // the layer is done with its experts
    }
  }
}

CacheSimResult result_from(const ExpertCacheStats& st, const TraceShape& shape, const CacheSimOptions& opt) {
  CacheSimResult r;
  r.tokens = shape.tokens;
  r.lookups = st.hits + st.misses;
  r.hits = st.hits;
  r.misses = st.misses;
  r.evictions = st.evictions;
  r.peak_bytes = st.peak_bytes;
  r.expert_bytes = opt.expert_bytes;
  return r;
}

void check_expert_bytes(const CacheSimOptions& opt) {
  if (opt.expert_bytes == 0) throw Error("--expert-mib: must be greater than 0");
}

}  // namespace

double CacheSimResult::mib_read_per_token() const {
  if (tokens == 0) return 0.0;
  return static_cast<double>(misses) * static_cast<double>(expert_bytes) / static_cast<double>(kMiB) /
         static_cast<double>(tokens);
}

CacheSimResult simulate_global_lru(std::span<const RouteTrace> traces, uint64_t budget_bytes,
                                   const CacheSimOptions& opt) {
  check_expert_bytes(opt);
  const TraceShape shape = shape_of(traces);
  const std::vector<MoeLayerShape> layers(static_cast<size_t>(shape.n_layers),
                                          MoeLayerShape{opt.expert_bytes, shape.n_expert, shape.top_k});
  check_cache_floor(budget_bytes, layers, /*ubatch=*/1);
  if (budget_bytes == 0) throw Error("--cache-mb: 0 turns the cache off; give a budget to simulate");
  ExpertCache cache(budget_bytes);
  replay(traces, cache, opt, opt.expert_bytes);
  CacheSimResult r = result_from(cache.stats(), shape, opt);
  r.policy = "global";
  r.budget_bytes = budget_bytes;
  return r;
}

CacheSimResult simulate_per_layer_lru(std::span<const RouteTrace> traces, int k, const CacheSimOptions& opt) {
  const TraceShape shape = shape_of(traces);
  if (k < shape.top_k) {
    throw Error("--per-layer " + std::to_string(k) + ": below the traces' top-k of " +
                std::to_string(shape.top_k) + " (a layer's experts must all be resident at once)");
  }
  // Capacity is counted in experts: with the size unknown, one unit each
  // gives the same hits, misses and evictions; the byte figures stay 0.
  const uint64_t unit = opt.expert_bytes > 0 ? opt.expert_bytes : 1;
  PartitionedExpertCache cache(std::vector<uint64_t>(static_cast<size_t>(shape.n_layers), unit), k);
  replay(traces, cache, opt, unit);
  CacheSimResult r = result_from(cache.stats(), shape, opt);
  if (opt.expert_bytes == 0) r.peak_bytes = 0;  // it counted units, not bytes
  r.policy = "per-layer";
  r.per_layer_k = k;
  r.budget_bytes = static_cast<uint64_t>(shape.n_layers) * static_cast<uint64_t>(k) * opt.expert_bytes;
  return r;
}

}  // namespace sluice::moe
