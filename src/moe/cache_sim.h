// Cache simulator: replays routing traces through the real ExpertCache (the
// same LRU code the ExpertStore uses) and counts what a run would read.
//
// Replay model: one token at a time (decode, ubatch 1), records in trace
// order (token-major). For each (token, layer) record its experts are looked
// up; a miss is "read" and inserted; all experts of the record stay pinned
// until the record is done, as the store pins a layer's experts while they
// are used. Every expert costs the same `expert_bytes`.
// Sequences (seq ids, and separate trace files) start with a cold cache
// unless `warm` is set.
//
// Pure computation; thread-safe for distinct calls.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "moe/expert_cache.h"

#include "moe/route_trace.h"

namespace sluice::moe {

struct CacheSimOptions {
  uint64_t expert_bytes = 0;  // one expert (gate+up+down); 0: unknown (per-layer only: no byte figures)
  bool warm = false;          // keep the cache across sequences and files
  // --cache-warm: experts, most wanted first (ExpertUsage::by_use), loaded
  // into the cache wherever it starts empty (the start; each sequence unless
  // `warm`), as many as fit. Preloads count as neither hits nor misses (the
  // engine would read them at load): CacheSimResult::preloaded.
  std::vector<ExpertKey> warm_start;
};

// Eviction policies of the global (byte-budget) simulation. Every expert
// costs expert_bytes, so the cache holds floor(budget / expert_bytes) of them.
//  Lru  the engine's ExpertCache (the very code the store runs).
//  Lru2 LRU-K with K = 2 (O'Neil et al. 1993): evict the unpinned expert whose
//       second most recent use is oldest (never used twice: oldest first, by
//       its last use). History is kept for evicted experts too, so an expert
//       that comes back often is recognised. Chosen over LFU-with-aging
//       because it needs no aging constant, reacts to shifts in popularity
//       within a couple of uses, and still protects the popular experts from
//       one-off ones (a one-off use never outranks a repeated one).
//  Min  Bélády's MIN (offline optimum for equal-sized entries): evict the
//       unpinned expert whose next use is farthest away (never again: first).
//       A lower bound on misses for any policy with the same pinning rule.
enum class SimPolicy { Lru, Lru2, Min };
const char* sim_policy_name(SimPolicy p);  // "lru", "lru-2", "min"
// "lru" | "lru-2" | "min"; Error naming --policy otherwise.
SimPolicy parse_sim_policy(const std::string& s);

struct CacheSimResult {
  std::string policy;         // "global" or "per-layer"
  std::string eviction = "lru";  // sim_policy_name of the eviction rule
  uint64_t preloaded = 0;     // --cache-warm entries loaded before use (over all cold starts)
  uint64_t budget_bytes = 0;  // global: the budget; per-layer: layers x K x expert_bytes
  int per_layer_k = 0;        // per-layer only
  uint64_t tokens = 0;        // distinct (seq, pos) over all traces
  uint64_t lookups = 0;       // expert requests
  uint64_t hits = 0;
  uint64_t misses = 0;        // = experts read
  uint64_t evictions = 0;
  uint64_t peak_bytes = 0;
  uint64_t expert_bytes = 0;

  double hit_rate() const { return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0; }
  double mib_read_per_token() const;
};

// Throws Error naming --cache-mb when the budget is below the mechanical floor
// (the widest record's experts; ubatch 1).
CacheSimResult simulate_global_lru(std::span<const RouteTrace> traces, uint64_t budget_bytes,
                                   const CacheSimOptions& opt);
// The same with any eviction policy (Lru runs simulate_global_lru).
CacheSimResult simulate_global(std::span<const RouteTrace> traces, uint64_t budget_bytes, const CacheSimOptions& opt,
                               SimPolicy policy);
// Throws Error naming --per-layer when K is below the traces' top-k, and
// naming --cache-warm when opt.warm_start is set (global budgets only). With
// expert_bytes 0 the counts are exact and budget_bytes / MiB read are 0.
CacheSimResult simulate_per_layer_lru(std::span<const RouteTrace> traces, int k,
                                      const CacheSimOptions& opt);

}  // namespace sluice::moe
