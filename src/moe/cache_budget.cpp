#include "moe/cache_budget.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "util/error.h"
#include "util/proc_memory.h"

namespace sluice::moe {

namespace {

uint64_t ceil_mib(uint64_t bytes) { return (bytes + kMiB - 1) / kMiB; }

const MoeLayerShape* widest_floor_layer(std::span<const MoeLayerShape> layers, int ubatch,
                                        uint64_t* floor, uint64_t* n_experts) {
  const MoeLayerShape* widest = nullptr;
  *floor = 0;
  *n_experts = 0;
  for (const MoeLayerShape& l : layers) {
    if (l.expert_bytes == 0 || l.n_expert <= 0 || l.top_k <= 0) continue;
    const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(ubatch) * static_cast<uint64_t>(l.top_k),
                                          static_cast<uint64_t>(l.n_expert));
    if (n * l.expert_bytes > *floor) {
      *floor = n * l.expert_bytes;
      *n_experts = n;
      widest = &l;
    }
  }
  return widest;
}

}  // namespace

std::string format_mib(uint64_t bytes) {
  char buf[48];
  if (bytes % kMiB == 0) {
    std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>(bytes / kMiB));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
  }
  return buf;
}

CacheMbSetting parse_cache_mb(const std::string& text) {
  if (text == "auto") return {true, 0};
  if (text == "off") return {false, 0};
  bool digits = !text.empty() && text.size() <= 12;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) {
    throw Error("--cache-mb: expected a whole number of MiB, 'auto' or 'off' (got '" + text + "')");
  }
  return {false, std::stoull(text)};
}

std::vector<MoeLayerShape> moe_layer_shapes(std::span<const gguf::LayerExpertParts> layers, int top_k) {
  std::vector<MoeLayerShape> shapes;
  shapes.reserve(layers.size());
  for (const gguf::LayerExpertParts& l : layers) {
    MoeLayerShape sh;
    sh.expert_bytes = l.expert_bytes();
    sh.n_expert = static_cast<int>(l.n_expert());
    sh.top_k = top_k;
    shapes.push_back(sh);
  }
  return shapes;
}

uint64_t cache_floor_bytes(std::span<const MoeLayerShape> layers, int ubatch) {
  if (ubatch < 1) throw Error("--ubatch: must be at least 1 (got " + std::to_string(ubatch) + ")");
  uint64_t floor = 0, n = 0;
  widest_floor_layer(layers, ubatch, &floor, &n);
  return floor;
}

uint64_t experts_in_flight_bytes(std::span<const MoeLayerShape> layers, int ubatch, int prefetch_depth) {
  if (prefetch_depth <= 0) return cache_floor_bytes(layers, ubatch);
  const uint64_t u = static_cast<uint64_t>(ubatch);
  const uint64_t d = static_cast<uint64_t>(prefetch_depth);
  const auto live = [](const MoeLayerShape& l) { return l.expert_bytes > 0 && l.n_expert > 0 && l.top_k > 0; };
  // Experts of `l` among `per_position` * ubatch routed ones, in bytes.
  const auto bytes = [u](const MoeLayerShape& l, uint64_t per_position) {
    return std::min(per_position * u, static_cast<uint64_t>(l.n_expert)) * l.expert_bytes;
  };
  uint64_t most = cache_floor_bytes(layers, ubatch);  // a layer with no MoE layer after it
  for (size_t i = 0; i + 1 < layers.size(); ++i) {
    const MoeLayerShape& cur = layers[i];
    const MoeLayerShape& next = layers[i + 1];
    if (!live(cur) || !live(next)) continue;  // prefetch runs only from a MoE layer into the next one
    const uint64_t depth = std::min<uint64_t>(d, static_cast<uint64_t>(next.top_k));
    most = std::max(most, bytes(cur, static_cast<uint64_t>(cur.top_k) + depth) + bytes(next, depth));
  }
  return most;
}

uint64_t token_demand_bytes(std::span<const MoeLayerShape> layers) {
  uint64_t total = 0;
  for (const MoeLayerShape& l : layers) {
    if (l.expert_bytes == 0 || l.n_expert <= 0 || l.top_k <= 0) continue;
    total += static_cast<uint64_t>(std::min(l.top_k, l.n_expert)) * l.expert_bytes;
  }
  return total;
}

void check_cache_floor(uint64_t budget_bytes, std::span<const MoeLayerShape> layers, int ubatch) {
  if (budget_bytes == 0) return;
  if (ubatch < 1) throw Error("--ubatch: must be at least 1 (got " + std::to_string(ubatch) + ")");
  uint64_t floor = 0, n = 0;
  const MoeLayerShape* widest = widest_floor_layer(layers, ubatch, &floor, &n);
  if (budget_bytes >= floor || widest == nullptr) return;
  throw Error("--cache-mb " + std::to_string(budget_bytes / kMiB) +
              ": below the mechanical floor of " + std::to_string(ceil_mib(floor)) +
              " MiB (one layer needs " + std::to_string(n) + " experts of " +
              format_mib(widest->expert_bytes) + " resident at once: ubatch " +
              std::to_string(ubatch) + " x top-k " + std::to_string(widest->top_k) + ", at most " +
              std::to_string(widest->n_expert) + "); use --cache-mb " +
              std::to_string(ceil_mib(floor)) + " or more, or --cache-mb 0 to turn the cache off");
}

std::string cache_demand_warning(uint64_t budget_bytes, std::span<const MoeLayerShape> layers) {
  const uint64_t demand = token_demand_bytes(layers);
  if (budget_bytes == 0 || budget_bytes >= demand) return {};
  return "--cache-mb " + std::to_string(budget_bytes / kMiB) + " is below one token's expert demand of " +
         std::to_string(ceil_mib(demand)) +
         " MiB (top-k experts of every MoE layer): each token evicts experts the next token needs "
         "again, so expect mostly misses";
}

AutoCacheBudget auto_cache_budget(std::string_view meminfo_text, const AutoCacheInputs& in) {
  const uint64_t avail = meminfo_available_bytes(meminfo_text);
  const uint64_t need = in.dense_bytes + in.kv_bytes + in.scratch_bytes + in.headroom_bytes;
  const uint64_t room = avail > need ? (avail - need) / kMiB * kMiB : 0;
  const uint64_t floor = (in.floor_bytes + kMiB - 1) / kMiB * kMiB;
  AutoCacheBudget r;
  r.bytes = room;
  std::string how = "--cache-mb auto: MemAvailable " + format_mib(avail) + " - dense " +
                    format_mib(in.dense_bytes) + " - KV " + format_mib(in.kv_bytes) + " - scratch " +
                    format_mib(in.scratch_bytes) + " - headroom " + format_mib(in.headroom_bytes) +
                    " leaves " + format_mib(room);
  if (in.ceil_bytes != 0 && r.bytes > in.ceil_bytes) {
    r.bytes = (in.ceil_bytes + kMiB - 1) / kMiB * kMiB;
    how += ", capped at " + format_mib(r.bytes) + " (every expert of the model fits)";
  }
  if (r.bytes < floor) {
    r.bytes = floor;
    r.below_floor = true;
    how += ", below the mechanical floor: using the floor " + format_mib(floor) +
           " (memory will be tight; consider a smaller --ubatch or --ctx)";
  }
  if (in.demand_bytes != 0 && r.bytes < in.demand_bytes) {
    r.bytes = 0;
    r.below_floor = false;
    r.below_demand = true;
    r.how = how + ", below one token's expert demand of " + format_mib(in.demand_bytes) +
            ": an LRU cache smaller than that never hits at decode (an expert returns only after the token's "
            "other experts have gone through it); cache off.";
    return r;
  }
  r.how = how + "; cache budget " + format_mib(r.bytes) + ".";
  return r;
}

}  // namespace sluice::moe
