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

#include "moe/route_trace.h"

namespace sluice::moe {

struct CacheSimOptions {
  uint64_t expert_bytes = 0;  // one expert (gate+up+down); 0: unknown (per-layer only: no byte figures)
  bool warm = false;          // keep the cache across sequences and files
};

struct CacheSimResult {
  std::string policy;         // "global" or "per-layer"
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
// Throws Error naming --per-layer when K is below the traces' top-k. With
// expert_bytes 0 the counts are exact and budget_bytes / MiB read are 0.
CacheSimResult simulate_per_layer_lru(std::span<const RouteTrace> traces, int k,
                                      const CacheSimOptions& opt);

}  // namespace sluice::moe
