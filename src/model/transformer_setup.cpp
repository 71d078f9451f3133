// Transformer's load-time rules: the flags checked before anything is
// allocated, the model state planned from the per-layer declarations
// (state_spec.h) against the memory available, and the expert cache budget.
#include <algorithm>
#include <limits>
#include <string>

#include "model/transformer.h"
#include "moe/cache_budget.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// Working memory besides the dense set, KV cache and expert cache: activations,
// logits and private expert buffers of a prefill batch. A fixed allowance; it
// only shapes --cache-mb auto.
constexpr uint64_t kScratchAllowance = uint64_t{64} << 20;

}  // namespace

// Resolves the expert cache budget once, at load (see ModelConfig). `layers`
// holds every MoE layer's shape; decode micro-batch 1 sets the floor.
// `decode_prefetch`: the --prefetch depth in force at decode; the floor is what
// decode holds at once, the next layer's prefetch included.
uint64_t Transformer::resolve_cache_bytes(const ModelConfig& cfg, std::span<const moe::MoeLayerShape> layers,
                                          uint64_t dense_bytes, uint64_t kv_bytes, int decode_prefetch) {
  const auto say = [&cfg](const std::string& line) {
    if (cfg.log) cfg.log(line);
  };
  constexpr int kUbatch = 1;
  if (cfg.load_all) {
    if (cfg.cache_auto || cfg.cache_bytes > 0) say("cache: off (--load-all keeps every expert resident)");
    return 0;
  }
  uint64_t bytes = cfg.cache_bytes;
  if (cfg.cache_auto) {
    uint64_t all_experts = 0;
    for (const moe::MoeLayerShape& l : layers) all_experts += l.expert_bytes * static_cast<uint64_t>(l.n_expert);
    moe::AutoCacheInputs in;
    // MemAvailable was read before loading: the anon dense buffers were not yet
    // allocated, and mmap/warm dense pages are page cache (counted as
    // available) that must stay resident; either way the dense set comes off.
    in.dense_bytes = dense_bytes;
    in.kv_bytes = kv_bytes;
    in.scratch_bytes = kScratchAllowance;
    in.floor_bytes = std::max(moe::experts_in_flight_bytes(layers, kUbatch, decode_prefetch), cfg.cache_floor_bytes);
    in.ceil_bytes = cfg.cache_ceil_bytes > 0 ? std::min(cfg.cache_ceil_bytes, all_experts) : all_experts;
    in.demand_bytes = moe::token_demand_bytes(layers);
    const moe::AutoCacheBudget b = moe::auto_cache_budget(cfg.cache_meminfo, in);
    say("cache: " + b.how + " (dense " + (cfg.dense_mode == moe::DenseMode::Anon ? "anon buffers" : "page cache") +
        "; floor " + moe::format_mib(in.floor_bytes) + ", token demand " +
        moe::format_mib(moe::token_demand_bytes(layers)) + ")");
    bytes = b.bytes;
  } else if (bytes > 0) {
    moe::check_cache_floor(bytes, layers, kUbatch);
    const uint64_t floor = moe::experts_in_flight_bytes(layers, kUbatch, decode_prefetch);
    if (bytes < floor)
      throw Error("--cache-mb " + moe::format_mib(bytes) + " is below the floor of " + moe::format_mib(floor) +
                  " with --prefetch at decode (depth " + std::to_string(decode_prefetch) +
                  "): a layer's experts and the next layer's predicted ones are pinned at once; raise --cache-mb "
                  "or use --prefetch=prefill");
    say("cache: " + moe::format_mib(bytes) + " (--cache-mb; floor " + moe::format_mib(floor) + ", token demand " +
        moe::format_mib(moe::token_demand_bytes(layers)) + ")");
  }
  const std::string warning = moe::cache_demand_warning(bytes, layers);
  if (!warning.empty()) say("cache: warning: " + warning);
  return bytes;
}

void Transformer::check_resident_fits(uint64_t dense_bytes, uint64_t state_bytes) const {
  if (cfg_.memory_bytes == 0) return;
  const bool anon = cfg_.dense_mode == moe::DenseMode::Anon;
  const uint64_t dense = anon ? dense_bytes : 0;  // mmap/warm dense pages are page cache: evictable
  const uint64_t cache = cfg_.load_all || cfg_.cache_auto ? 0 : cfg_.cache_bytes;
  // Scratch is left out (kScratchAllowance is a planning figure, not what a
  // small model uses): this refuses only what cannot fit at all.
  const uint64_t need = dense + state_bytes + cache;
  if (need <= cfg_.memory_bytes) return;
  // Hint what would fit on its own; where nothing alone does, every lever.
  const auto fits_without = [&](uint64_t part) { return need - part <= cfg_.memory_bytes; };
  const bool any = (cache && fits_without(cache)) || fits_without(state_bytes) || (anon && fits_without(dense));
  std::string hints = "free memory";
  if (cache && (!any || fits_without(cache))) hints += ", lower --cache-mb";
  if (!any || fits_without(state_bytes)) hints += ", lower -c";
  if (anon && (!any || fits_without(dense)))
    hints += ", or use --dense-weights mmap (dense pages are then re-read from the file when evicted: slow)";
  fail(gguf_->paths().front(),
       "needs at least " + moe::format_mib(need) + " of memory that must stay resident (" +
           (anon ? "dense weights " + moe::format_mib(dense) + " with --dense-weights anon, " : std::string()) +
           "model state " + moe::format_mib(state_bytes) +
           (cache ? ", --cache-mb " + moe::format_mib(cache) : std::string()) + ") but " +
           moe::format_mib(cfg_.memory_bytes) + " are available (MemAvailable, or the cgroup's limit where lower); " +
           hints);
}

void Transformer::check_config() {
  if (cfg_.io_threads < 1)
    throw Error("--io-threads: must be >= 1 (got " + std::to_string(cfg_.io_threads) + ")");
  if (cfg_.n_ctx < 0) throw Error("-c: context size must be >= 0 (got " + std::to_string(cfg_.n_ctx) + ")");
  if (cfg_.ubatch < 1) throw Error("--ubatch: must be >= 1 (got " + std::to_string(cfg_.ubatch) + ")");
  if (cfg_.n_slots < 1 || cfg_.n_slots > kMaxSlots)
    throw Error("--parallel: must be in [1, " + std::to_string(kMaxSlots) + "] (got " + std::to_string(cfg_.n_slots) +
                ")");
  moe::validate_trim_config(cfg_.trims);
  // Trims renormalise where the router's weights sum to 1 (the architecture's
  // rule, not the user's); every MoE layer of an architecture routes alike.
  for (const LayerDesc& l : desc_.layers)
    if (l.ffn.kind == FfnKind::Moe) cfg_.trims.normalize = trims_renormalize(l.ffn.router);
  if (hp_.is_moe())
    moe_k_ = moe::effective_top_k(cfg_.trims, static_cast<int>(hp_.n_expert_used), static_cast<int>(hp_.n_expert));
  for (const LayerDesc& l : desc_.layers) {
    const RouterDesc& r = l.ffn.router;
    if (l.ffn.kind != FfnKind::Moe || r.n_group == 0 || r.n_group_used == 0 || r.n_group_used >= r.n_group) continue;
    const uint64_t eligible = uint64_t{hp_.n_expert} / r.n_group * r.n_group_used;
    if (static_cast<uint64_t>(moe_k_) > eligible)
      throw Error("--moe-top-k: " + std::to_string(moe_k_) + " experts cannot be chosen from the " +
                  std::to_string(eligible) + " experts of the " + std::to_string(r.n_group_used) +
                  " expert groups this model routes within");
  }
}

Transformer::StatePlan Transformer::plan_state(int n_ctx) const {
  if (cfg_.log && hp_.n_ctx_train > 0 && static_cast<uint32_t>(n_ctx) > hp_.n_ctx_train)
    cfg_.log("sluice: warning: -c " + std::to_string(n_ctx) + " is above the " + std::to_string(hp_.n_ctx_train) +
             " positions this model was trained on; text past them may degrade");
  // The model state is sized by -c (state_spec.h, the rule inspect reports
  // too): refuse before allocating what cannot fit. The NextN head's rows
  // count when it is loaded.
  StatePlan plan;
  plan.specs = model_state_specs(desc_, n_ctx, cfg_.ubatch);
  const std::vector<LayerStateSpec>& specs = plan.specs;
  std::vector<LayerStateSpec> all_specs = specs;
  if (cfg_.mtp && !desc_.nextn.empty()) {
    plan.nextn = layer_state_spec(desc_.nextn.front().block, hp_, n_ctx, cfg_.ubatch);
    all_specs.push_back(plan.nextn);
  }
  // Every slot holds a trunk state of its own (the NextN head's is slot 0's).
  std::optional<StateBytes> need = model::state_bytes(all_specs, cfg_.kv_type);
  const std::optional<StateBytes> slot_need = model::state_bytes(specs, cfg_.kv_type);
  const uint64_t n_extra = static_cast<uint64_t>(cfg_.n_slots - 1);
  if (need && slot_need && slot_need->total() <= (std::numeric_limits<uint64_t>::max() - need->total()) / 64) {
    need->kv += n_extra * slot_need->kv;
    need->recurrent += n_extra * slot_need->recurrent;
  } else {
    need.reset();
  }
  const bool budgeted = cfg_.lazy_slots && cfg_.slot_state_budget > 0;
  if (need) {
    plan.slot_budget = static_cast<uint64_t>(cfg_.n_slots) * slot_need->total();
    if (budgeted) {  // --state-mb: the slots take their budget, whatever its split between kinds
      need->kv -= static_cast<uint64_t>(cfg_.n_slots) * slot_need->kv;
      need->recurrent -= static_cast<uint64_t>(cfg_.n_slots) * slot_need->recurrent;
      need->kv += cfg_.slot_state_budget;
      plan.slot_budget = cfg_.slot_state_budget;
    }
  }
  if (!need || (cfg_.memory_bytes > 0 && need->total() > cfg_.memory_bytes)) {
    uint64_t kv_values = 0;  // per position, over every KV layer
    int kv_layers = 0;
    for (const LayerStateSpec& l : all_specs)
      if (l.kind == StateKind::KvRows) kv_values += static_cast<uint64_t>(l.kv.k_dim() + l.kv.v_dim()), ++kv_layers;
    throw Error("-c " + std::to_string(n_ctx) + ": the model state would need " +
                (need ? moe::format_mib(need->total()) : std::string("more than 2^64 bytes")) + " (KV rows: " +
                std::to_string(kv_layers) + " layers x " + std::to_string(n_ctx) + " positions, " +
                std::to_string(kv_values) + " " + kv_type_name(cfg_.kv_type) + " values per position" +
                (need && need->recurrent ? "; recurrent state " + moe::format_mib(need->recurrent) : "") +
                ")" + (cfg_.n_slots > 1 && !budgeted ? " for " + std::to_string(cfg_.n_slots) + " slots (--parallel)" : std::string()) +
                ", more than the " + moe::format_mib(cfg_.memory_bytes) + " of memory available; lower " +
                (budgeted ? "--state-mb" : cfg_.n_slots > 1 ? "-c or --parallel" : "-c"));
  }
  plan.bytes = *need;
  return plan;
}

}  // namespace sluice::model
