// `sluice cache-sim`: replays routing traces through the expert cache (the
// same LRU code the engine uses) and prints, per budget, the hit rate, the
// expert bytes read per token and the evictions.
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "moe/cache_budget.h"
#include "moe/cache_sim.h"
#include "moe/route_trace.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct CacheSimCliOptions {
  std::vector<std::string> traces;
  double expert_mib = 0;
  std::vector<std::string> cache_mb;
  std::vector<int> per_layer;
  bool warm = false;
  bool json = false;
};

void print_table(const std::vector<moe::RouteTrace>& traces, const std::vector<moe::CacheSimResult>& results,
                 const CacheSimCliOptions& o) {
  uint64_t records = 0, tokens = 0;
  for (const auto& t : traces) {
    records += t.records.size();
    tokens += t.n_tokens();
    outf("trace %s: %s format, %zu records, %llu tokens, %d layers, top-%d of %d experts\n",
                t.source.c_str(), t.format.c_str(), t.records.size(),
                static_cast<unsigned long long>(t.n_tokens()), t.n_layers(), t.max_top_k(), t.n_expert());
  }
  outf("expert size %.2f MiB; %s\n\n", o.expert_mib,
              o.warm ? "cache kept warm across sequences" : "each sequence starts with a cold cache");
  outf("%-10s %12s %9s %8s %14s %10s\n", "policy", "budget MiB", "per-layer", "hit %", "MiB read/token",
              "evictions");
  for (const auto& r : results) {
    const std::string k = r.per_layer_k ? std::to_string(r.per_layer_k) : "-";
    outf("%-10s %12.0f %9s %8.2f %14.1f %10llu\n", r.policy.c_str(),
                static_cast<double>(r.budget_bytes) / static_cast<double>(moe::kMiB), k.c_str(),
                100.0 * r.hit_rate(), r.mib_read_per_token(), static_cast<unsigned long long>(r.evictions));
  }
}

void print_json(const std::vector<moe::RouteTrace>& traces, const std::vector<moe::CacheSimResult>& results,
                const CacheSimCliOptions& o) {
  nlohmann::json j;
  j["expert_mib"] = o.expert_mib;
  j["warm"] = o.warm;
  for (const auto& t : traces) {
    j["traces"].push_back({{"path", t.source},
                           {"format", t.format},
                           {"records", t.records.size()},
                           {"tokens", t.n_tokens()},
                           {"layers", t.n_layers()}});
  }
  j["results"] = nlohmann::json::array();
  for (const auto& r : results) {
    j["results"].push_back({{"policy", r.policy},
                            {"budget_mib", static_cast<double>(r.budget_bytes) / static_cast<double>(moe::kMiB)},
                            {"per_layer_k", r.per_layer_k},
                            {"tokens", r.tokens},
                            {"lookups", r.lookups},
                            {"hits", r.hits},
                            {"misses", r.misses},
                            {"evictions", r.evictions},
                            {"hit_rate", r.hit_rate()},
                            {"mib_read_per_token", r.mib_read_per_token()}});
  }
  outf("%s\n", j.dump(2).c_str());
}

void run_cache_sim(const CacheSimCliOptions& o) {
  if (!(o.expert_mib > 0) || !std::isfinite(o.expert_mib)) {
    throw Error("--expert-mib: must be a positive number of MiB (got " + std::to_string(o.expert_mib) + ")");
  }
  if (o.cache_mb.empty() && o.per_layer.empty()) {
    throw Error("cache-sim: give --cache-mb N[,N...] and/or --per-layer K[,K...]");
  }
  std::vector<moe::RouteTrace> traces;
  for (const std::string& p : o.traces) traces.push_back(moe::read_route_trace(p));
  moe::CacheSimOptions opt;
  opt.expert_bytes = static_cast<uint64_t>(std::llround(o.expert_mib * static_cast<double>(moe::kMiB)));
  opt.warm = o.warm;
  std::vector<moe::CacheSimResult> results;
  for (const std::string& s : o.cache_mb) {
    const moe::CacheMbSetting c = moe::parse_cache_mb(s);
    if (c.automatic) throw Error("--cache-mb auto: not meaningful for cache-sim; give budgets in MiB");
    results.push_back(moe::simulate_global_lru(traces, c.mib * moe::kMiB, opt));
  }
  for (int k : o.per_layer) results.push_back(moe::simulate_per_layer_lru(traces, k, opt));
  if (o.json) {
    print_json(traces, results, o);
  } else {
    print_table(traces, results, o);
  }
}

}  // namespace

void register_cache_sim(CLI::App& app) {
  auto opts = std::make_shared<CacheSimCliOptions>();
  CLI::App* cmd = app.add_subcommand("cache-sim", "replay routing traces through the expert cache");
  cmd->add_option("--trace", opts->traces, "routing trace (JSONL: sluice, Mixtral or Qwen-MoE format); repeatable")
      ->required();
  cmd->add_option("--expert-mib", opts->expert_mib, "bytes of one expert (gate+up+down) in MiB, e.g. 94.5")
      ->required();
  cmd->add_option("--cache-mb", opts->cache_mb, "global LRU budgets in MiB, comma separated")->delimiter(',');
  cmd->add_option("--per-layer", opts->per_layer, "per-layer LRU capacities in experts, comma separated")
      ->delimiter(',');
  cmd->add_flag("--warm", opts->warm, "keep the cache across sequences and trace files (default: cold per sequence)");
  cmd->add_flag("--json", opts->json, "print the results as JSON");
  cmd->callback([opts] { run_cache_sim(*opts); });
}

}  // namespace sluice::cli
