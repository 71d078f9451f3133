// `sluice cache-sim`: replays routing traces through the expert cache (the
// same LRU code the engine uses, or LRU-2 / Bélády's MIN: --policy) and
// prints, per budget, the hit rate, the expert bytes read per token and the
// evictions. --model maps the traces onto a model as --route-replay does
// (same experts, same expert size), so its figures predict a replayed bench;
// --cache-warm starts the cache from a saved expert-usage profile.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "moe/cache_budget.h"
#include "gguf/expert_layout.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "moe/cache_sim.h"
#include "moe/expert_usage.h"
#include "moe/route_replay.h"
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
  std::vector<std::string> policies = {"lru"};
  std::string cache_warm;  // --cache-warm FILE (expert-usage profile)
  std::string model;       // --model FILE: replay the traces onto this model
  uint64_t tokens = 0;     // --tokens N (with --model): replay N tokens (0: the trace's own count)
};

// The traces as `--route-replay` would route them on `model_path`: one
// sluice-format trace of `tokens` positions (0: each complete trace token
// once), every MoE layer of the model, the model's experts and top-k.
// Sets `expert_mib` from the model when it was not given.
moe::RouteTrace replay_onto_model(const moe::RouteTrace& trace, const std::string& model_path, uint64_t tokens,
                                  double& expert_mib) {
  const gguf::GgufModel g = gguf::GgufModel::open(model_path);
  const model::HParams hp = model::describe_architecture(g).hp;
  if (!hp.is_moe()) throw Error("--model " + model_path + ": a dense model has no experts to cache");
  const std::vector<moe::MoeLayerShape> shapes =
      moe::moe_layer_shapes(gguf::layer_expert_parts(g), static_cast<int>(hp.n_expert_used));
  uint64_t widest = 0;
  for (const moe::MoeLayerShape& s : shapes) widest = std::max(widest, s.expert_bytes);
  if (!(expert_mib > 0)) expert_mib = static_cast<double>(widest) / static_cast<double>(moe::kMiB);
  const int k = static_cast<int>(hp.n_expert_used);
  const moe::RouteReplay replay(trace, static_cast<int>(hp.n_expert), k);
  moe::RouteTrace out;
  out.source = trace.source + " onto " + model_path;
  out.format = "sluice";
  const uint64_t n = tokens ? tokens : replay.n_tokens();
  for (uint64_t t = 0; t < n; ++t) {
    for (size_t l = 0; l < shapes.size() && l < hp.n_layer; ++l) {
      if (shapes[l].expert_bytes == 0) continue;
      moe::RouteRecord r;
      r.pos = static_cast<int64_t>(t);
      r.layer = static_cast<int>(l);
      r.experts.assign(replay.experts(t, r.layer), replay.experts(t, r.layer) + k);
      r.weights.assign(replay.weights(t, r.layer), replay.weights(t, r.layer) + k);
      out.records.push_back(std::move(r));
    }
  }
  return out;
}

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
  outf("%-10s %-8s %12s %9s %8s %14s %10s %10s\n", "policy", "eviction", "budget MiB", "per-layer", "hit %",
       "MiB read/token", "evictions", "preloaded");
  for (const auto& r : results) {
    const std::string k = r.per_layer_k ? std::to_string(r.per_layer_k) : "-";
    outf("%-10s %-8s %12.0f %9s %8.2f %14.1f %10llu %10llu\n", r.policy.c_str(), r.eviction.c_str(),
         static_cast<double>(r.budget_bytes) / static_cast<double>(moe::kMiB), k.c_str(), 100.0 * r.hit_rate(),
         r.mib_read_per_token(), static_cast<unsigned long long>(r.evictions),
         static_cast<unsigned long long>(r.preloaded));
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
                            {"eviction", r.eviction},
                            {"preloaded", r.preloaded},
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

void run_cache_sim(CacheSimCliOptions o) {
  std::vector<moe::RouteTrace> traces;
  for (const std::string& p : o.traces) traces.push_back(moe::read_route_trace(p));
  if (!o.model.empty()) {
    for (moe::RouteTrace& t : traces) t = replay_onto_model(t, o.model, o.tokens, o.expert_mib);
  } else if (o.tokens) {
    throw Error("--tokens: only applies with --model");
  }
  if (!(o.expert_mib > 0) || !std::isfinite(o.expert_mib)) {
    throw Error("--expert-mib: must be a positive number of MiB (got " + std::to_string(o.expert_mib) + ")");
  }
  if (o.cache_mb.empty() && o.per_layer.empty()) {
    throw Error("cache-sim: give --cache-mb N[,N...] and/or --per-layer K[,K...]");
  }
  moe::CacheSimOptions opt;
  opt.expert_bytes = static_cast<uint64_t>(std::llround(o.expert_mib * static_cast<double>(moe::kMiB)));
  opt.warm = o.warm;
  if (!o.cache_warm.empty()) opt.warm_start = moe::read_expert_usage(o.cache_warm, "--cache-warm").by_use();
  std::vector<moe::SimPolicy> policies;
  for (const std::string& p : o.policies) policies.push_back(moe::parse_sim_policy(p));
  std::vector<moe::CacheSimResult> results;
  for (const std::string& s : o.cache_mb) {
    const moe::CacheMbSetting c = moe::parse_cache_mb(s);
    if (c.automatic) throw Error("--cache-mb auto: not meaningful for cache-sim; give budgets in MiB");
    for (moe::SimPolicy p : policies) results.push_back(moe::simulate_global(traces, c.mib * moe::kMiB, opt, p));
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
  cmd->add_option("--expert-mib", opts->expert_mib,
                  "bytes of one expert (gate+up+down) in MiB, e.g. 94.5 (required without --model)");
  cmd->add_option("--policy", opts->policies, "eviction policies for --cache-mb: lru, lru-2, min (Belady's "
                  "offline optimum), comma separated")
      ->delimiter(',');
  cmd->add_option("--cache-warm", opts->cache_warm,
                  "start each cold cache filled with the most used experts of an expert-usage profile "
                  "(`sluice run --save-usage FILE`)");
  cmd->add_option("--model", opts->model,
                  "map the traces onto this model as --route-replay does (its experts, top-k and expert size)");
  cmd->add_option("--tokens", opts->tokens, "with --model: replay this many tokens (wrapping; 0: the trace's own)");
  cmd->add_option("--cache-mb", opts->cache_mb, "global LRU budgets in MiB, comma separated")->delimiter(',');
  cmd->add_option("--per-layer", opts->per_layer, "per-layer LRU capacities in experts, comma separated")
      ->delimiter(',');
  cmd->add_flag("--warm", opts->warm, "keep the cache across sequences and trace files (default: cold per sequence)");
  cmd->add_flag("--json", opts->json, "print the results as JSON");
  cmd->callback([opts] { run_cache_sim(*opts); });
}

}  // namespace sluice::cli
