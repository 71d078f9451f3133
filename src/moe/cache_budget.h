// Sizing the expert cache: the `--cache-mb` flag, its mechanical floor, the
// per-token demand warning, and `--cache-mb auto` from /proc/meminfo.
//
// Definitions (all in bytes of whole experts, gate+up+down):
//  - mechanical floor: what one layer of one micro-batch needs resident at
//    once — the widest MoE layer's min(ubatch * top_k, n_expert) experts.
//    Below it a layer's experts cannot all be pinned together, so the cache
//    would evict experts the layer is still using: an Error.
//  - token demand: sum over MoE layers of top_k experts — what one token
//    touches. Between the floor and this, every token evicts experts the
//    next token needs again: allowed, with a warning.
//
// Pure functions (no I/O; /proc/meminfo is parsed by util/proc_memory.h); thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/expert_layout.h"

namespace sluice::moe {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

struct MoeLayerShape {
  uint64_t expert_bytes = 0;  // one expert, gate+up+down (0: layer without experts)
  int n_expert = 0;
  int top_k = 0;
};

// One shape per entry of `layers` (gguf::layer_expert_parts, either file
// layout), each with the model's own experts-per-token `top_k`: what the
// floor, token demand and the auto budget are sized from. A layer without
// experts gets expert_bytes 0.
std::vector<MoeLayerShape> moe_layer_shapes(std::span<const gguf::LayerExpertParts> layers, int top_k);

// Parsed `--cache-mb`: "auto", "off" or a whole number of MiB ("0" = off).
struct CacheMbSetting {
  bool automatic = false;
  uint64_t mib = 0;
};
CacheMbSetting parse_cache_mb(const std::string& text);  // throws Error naming --cache-mb

uint64_t cache_floor_bytes(std::span<const MoeLayerShape> layers, int ubatch);

// The most expert bytes a micro-batch of `ubatch` positions holds at once
// (slots with the cache off, pinned entries with it) when each MoE layer
// prefetches the next one's predicted experts at `prefetch_depth` per
// position (0: no prefetch; then this is cache_floor_bytes). While layer l
// computes it holds its own batches, whose distinct experts are the
// prefetched ones (right or wrong) plus the needed ones the prefetch missed,
// at most min((top_k + depth) * ubatch, n_expert), and layer l+1's prefetch,
// at most min(depth * ubatch, n_expert): the maximum over adjacent MoE layer
// pairs. So prefill (ubatch * top_k >= n_expert) holds two whole layers, and
// decode at full depth 3 * top_k experts.
uint64_t experts_in_flight_bytes(std::span<const MoeLayerShape> layers, int ubatch, int prefetch_depth);
uint64_t token_demand_bytes(std::span<const MoeLayerShape> layers);

// Throws Error naming --cache-mb and the floor in MiB when 0 < budget < floor.
// A budget of 0 (cache off) always passes.
void check_cache_floor(uint64_t budget_bytes, std::span<const MoeLayerShape> layers, int ubatch);

// A warning sentence when 0 < budget < token demand; empty otherwise.
std::string cache_demand_warning(uint64_t budget_bytes, std::span<const MoeLayerShape> layers);

struct AutoCacheInputs {
  uint64_t dense_bytes = 0;    // resident non-expert weights
  uint64_t kv_bytes = 0;       // KV cache at the configured context
  uint64_t scratch_bytes = 0;  // activations, read slots, other working memory
  uint64_t headroom_bytes = uint64_t{1} << 30;  // left for the OS, page cache, other programs
  uint64_t floor_bytes = 0;    // mechanical floor (cache_floor_bytes)
  uint64_t ceil_bytes = 0;     // every expert of the model: more is never useful (0: no ceiling)
  // One token's expert demand (token_demand_bytes; 0: unknown). An LRU cache
  // smaller than this never hits at decode: an expert comes back only after
  // the whole token's other experts, a reuse distance above the capacity. So
  // a budget below it turns the cache off (a cache of that size is pure cost:
  // copies and resident memory for a 0% hit rate, measured on Qwen2-57B-A14B).
  uint64_t demand_bytes = 0;
};

struct AutoCacheBudget {
  uint64_t bytes = 0;   // whole MiB
  std::string how;      // one sentence: the arithmetic and any clamp
  bool below_floor = false;  // memory did not even cover the floor; bytes == floor
  bool below_demand = false;  // below one token's demand: bytes == 0, the cache is off
};

// budget = MemAvailable (util's meminfo_available_bytes) - dense - KV - scratch - headroom, rounded down to a
// MiB, then clamped to [floor, ceil] (floor wins when ceil < floor); then 0 (cache
// off) when that is below in.demand_bytes.
AutoCacheBudget auto_cache_budget(std::string_view meminfo_text, const AutoCacheInputs& in);

// "1234 MiB" / "94.5 MiB" (one decimal when not whole).
std::string format_mib(uint64_t bytes);

}  // namespace sluice::moe
