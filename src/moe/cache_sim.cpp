#include "moe/cache_sim.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
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

// --cache-warm into the engine's LRU: least wanted first, so the most wanted
// end most recently used; stops when the next one would evict.
uint64_t preload(ExpertCache& cache, const CacheSimOptions& opt) {
  const size_t fit = static_cast<size_t>(cache.budget() / opt.expert_bytes);
  const size_t n = std::min(fit, opt.warm_start.size());
  for (size_t i = n; i-- > 0;) cache.insert(opt.warm_start[i], opt.expert_bytes);
  return n;
}
uint64_t preload(PartitionedExpertCache&, const CacheSimOptions&) { return 0; }  // refused earlier

// Runs every record through `cache` (ExpertCache or PartitionedExpertCache);
// every expert is inserted at `expert_bytes`.
template <class Cache>
uint64_t replay(std::span<const RouteTrace> traces, Cache& cache, const CacheSimOptions& opt, uint64_t expert_bytes) {
  std::vector<ExpertCache::Pin> pins;
  bool first = true;
  uint64_t preloaded = 0;
  for (const RouteTrace& t : traces) {
    int seq = 0;
    bool new_file = true;
    for (const RouteRecord& r : t.records) {
      const bool cold_start = first || (!opt.warm && (new_file || r.seq != seq));
      if (!first && cold_start) cache.clear();
      if (cold_start && !opt.warm_start.empty()) preloaded += preload(cache, opt);
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
  return preloaded;
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
  const uint64_t preloaded = replay(traces, cache, opt, opt.expert_bytes);
  ExpertCacheStats st = cache.stats();
  // Preloading inserts without lookups; evictions it never causes.
  CacheSimResult r = result_from(st, shape, opt);
  r.preloaded = preloaded;
  r.policy = "global";
  r.budget_bytes = budget_bytes;
  return r;
}

CacheSimResult simulate_per_layer_lru(std::span<const RouteTrace> traces, int k, const CacheSimOptions& opt) {
  if (!opt.warm_start.empty()) throw Error("--cache-warm: applies to global budgets (--cache-mb), not --per-layer");
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

const char* sim_policy_name(SimPolicy p) {
  switch (p) {
    case SimPolicy::Lru: return "lru";
    case SimPolicy::Lru2: return "lru-2";
    case SimPolicy::Min: return "min";
  }
  return "?";
}

SimPolicy parse_sim_policy(const std::string& s) {
  for (SimPolicy p : {SimPolicy::Lru, SimPolicy::Lru2, SimPolicy::Min})
    if (s == sim_policy_name(p)) return p;
  throw Error("--policy: unknown eviction policy '" + s + "' (expected lru, lru-2 or min)");
}

namespace {

uint64_t key_id(ExpertKey k) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(k.layer)) << 32) | static_cast<uint32_t>(k.expert);
}

// One lookup of the flattened replay: which expert, and where its record and
// its cold segment (the span between cache clears) start.
struct Access {
  ExpertKey key;
  size_t record_start = 0;  // index of the record's first access
  size_t record_size = 0;
  bool cold_start = false;  // the cache is empty (cleared) just before this record
};

std::vector<Access> flatten(std::span<const RouteTrace> traces, const CacheSimOptions& opt) {
  std::vector<Access> out;
  bool first = true;
  for (const RouteTrace& t : traces) {
    int seq = 0;
    bool new_file = true;
    for (const RouteRecord& r : t.records) {
      const bool cold = first || (!opt.warm && (new_file || r.seq != seq));
      first = false;
      new_file = false;
      seq = r.seq;
      const size_t start = out.size();
      for (size_t i = 0; i < r.experts.size(); ++i)
        out.push_back(Access{{r.layer, r.experts[i]}, start, r.experts.size(), cold && i == 0});
    }
  }
  return out;
}

// Count-based simulation of LRU-2 or MIN with the store's pinning rule (a
// record's hits are pinned before its misses are inserted).
class CountSim {
 public:
  CountSim(const std::vector<Access>& acc, size_t capacity, SimPolicy policy)
      : acc_(acc), cap_(capacity), policy_(policy) {
    for (size_t i = 0; i < acc.size(); ++i) uses_[key_id(acc[i].key)].push_back(i);
    segment_end_.assign(acc.size(), acc.size());
    size_t end = acc.size();
    for (size_t i = acc.size(); i-- > 0;) {
      segment_end_[i] = end;
      if (acc[i].cold_start) end = i;
    }
  }

  CacheSimResult run(const std::vector<ExpertKey>& warm_start) {
    CacheSimResult r;
    std::vector<size_t> misses;  // access indices
    for (size_t i = 0; i < acc_.size();) {
      const Access& a = acc_[i];
      if (a.cold_start) {
        resident_.clear();
        const size_t n = std::min(cap_, warm_start.size());
        // Preloaded experts count as used once, in order, least wanted first.
        for (size_t j = n; j-- > 0;) {
          const uint64_t id = key_id(warm_start[j]);
          touch(id, i);
          resident_[id] = warm_start[j];
        }
        r.preloaded += n;
      }
      const size_t end = i + a.record_size;
      pinned_.clear();
      misses.clear();
      for (size_t j = i; j < end; ++j) {
        const uint64_t id = key_id(acc_[j].key);
        ++r.lookups;
        if (resident_.count(id)) {
          ++r.hits;
          pinned_.push_back(id);
          touch(id, j);
        } else {
          ++r.misses;
          misses.push_back(j);
        }
      }
      for (size_t at : misses) {
        const uint64_t id = key_id(acc_[at].key);
        touch(id, at);
        if (resident_.size() >= cap_) {
          if (!evict(at)) continue;  // everything pinned: used uncached
          ++r.evictions;
        }
        resident_[id] = acc_[at].key;
        pinned_.push_back(id);
      }
      r.peak_bytes = std::max<uint64_t>(r.peak_bytes, resident_.size());
      i = end;
    }
    return r;
  }

 private:
  struct History {
    uint64_t last = 0, second = 0;  // access times + 1 (0: none)
  };
  void touch(uint64_t id, size_t at) {
    History& h = hist_[id];
    if (h.last == static_cast<uint64_t>(at) + 1) return;  // one record's repeat
    h.second = h.last;
    h.last = static_cast<uint64_t>(at) + 1;
  }
  // Next use of `id` after access `at`, within `at`'s cold segment (max: never).
  size_t next_use(uint64_t id, size_t at) const {
    const std::vector<size_t>& u = uses_.at(id);
    const auto it = std::upper_bound(u.begin(), u.end(), at);
    if (it == u.end() || *it >= segment_end_[at]) return std::numeric_limits<size_t>::max();
    return *it;
  }
  bool evict(size_t at) {
    uint64_t victim = 0;
    bool found = false;
    size_t best_next = 0;
    History best_h;
    for (const auto& [id, key] : resident_) {
      if (std::find(pinned_.begin(), pinned_.end(), id) != pinned_.end()) continue;
      if (policy_ == SimPolicy::Min) {
        const size_t n = next_use(id, at);
        if (!found || n > best_next || (n == best_next && id < victim)) {
          best_next = n;
          victim = id;
          found = true;
        }
      } else {
        const History h = hist_.at(id);
        const bool better = !found || h.second < best_h.second ||
                            (h.second == best_h.second && (h.last < best_h.last || (h.last == best_h.last && id < victim)));
        if (better) {
          best_h = h;
          victim = id;
          found = true;
        }
      }
    }
    if (found) resident_.erase(victim);
    return found;
  }

  const std::vector<Access>& acc_;
  const size_t cap_;
  const SimPolicy policy_;
  std::unordered_map<uint64_t, std::vector<size_t>> uses_;
  std::vector<size_t> segment_end_;
  std::unordered_map<uint64_t, ExpertKey> resident_;
  std::unordered_map<uint64_t, History> hist_;
  std::vector<uint64_t> pinned_;
};

}  // namespace

CacheSimResult simulate_global(std::span<const RouteTrace> traces, uint64_t budget_bytes, const CacheSimOptions& opt,
                               SimPolicy policy) {
  if (policy == SimPolicy::Lru) {
    CacheSimResult r = simulate_global_lru(traces, budget_bytes, opt);
    r.eviction = sim_policy_name(policy);
    return r;
  }
  check_expert_bytes(opt);
  const TraceShape shape = shape_of(traces);
  const std::vector<MoeLayerShape> layers(static_cast<size_t>(shape.n_layers),
                                          MoeLayerShape{opt.expert_bytes, shape.n_expert, shape.top_k});
  check_cache_floor(budget_bytes, layers, /*ubatch=*/1);
  if (budget_bytes == 0) throw Error("--cache-mb: 0 turns the cache off; give a budget to simulate");
  const std::vector<Access> acc = flatten(traces, opt);
  CountSim sim(acc, static_cast<size_t>(budget_bytes / opt.expert_bytes), policy);
  CacheSimResult r = sim.run(opt.warm_start);
  r.peak_bytes *= opt.expert_bytes;
  r.tokens = shape.tokens;
  r.expert_bytes = opt.expert_bytes;
  r.policy = "global";
  r.eviction = sim_policy_name(policy);
  r.budget_bytes = budget_bytes;
  return r;
}

}  // namespace sluice::moe
