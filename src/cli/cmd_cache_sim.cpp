// `sluice cache-sim`: replays routing traces through the expert cache (the
// same LRU code the engine uses) and prints, per budget, the hit rate, the
// expert bytes read per token and the evictions. The expert size comes from
// --expert-mib or the model (-m); per-layer capacities need neither (their
// byte columns are then "-").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "moe/cache_budget.h"
#include "moe/cache_sim.h"
#include "moe/route_trace.h"
#include "tools/model_info.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct CacheSimCliOptions {
  std::vector<std::string> traces;
  std::string model;      // -m: read the expert size from this GGUF
  double expert_mib = 0;  // --expert-mib, or from -m; 0: unknown (per-layer only)
  std::string expert_size_source;  // how expert_mib was found, for the table
  std::vector<std::string> cache_mb;
  std::vector<int> per_layer;
  bool warm = false;
  bool json = false;
};

std::string fmt_mib(double mib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", mib);
  return buf;
}

// One expert's gate+up+down bytes in MiB, from the model's MoE layers; when
// the layers differ (mixed quantisation) their mean, said in `source`.
double model_expert_mib(const std::string& path, std::string& source) {
  const tools::ModelInfo info = tools::model_info(gguf::GgufModel::open(path));
  uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
  size_t n = 0;
  for (const tools::LayerSizing& l : info.sizing.layers) {
    if (l.per_expert_bytes == 0) continue;
    sum += l.per_expert_bytes;
    lo = std::min(lo, l.per_expert_bytes);
    hi = std::max(hi, l.per_expert_bytes);
    ++n;
  }
  if (n == 0) throw Error(path + ": -m: the model has no routed experts to size a cache for");
  source = lo == hi ? " (from " + path + ")"
                    : " (mean over the layers of " + path + ", which range " +
                          fmt_mib(static_cast<double>(lo) / static_cast<double>(moe::kMiB)) + ".." +
                          fmt_mib(static_cast<double>(hi) / static_cast<double>(moe::kMiB)) + " MiB)";
  return static_cast<double>(sum) / static_cast<double>(n) / static_cast<double>(moe::kMiB);
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
  const std::string size = o.expert_mib > 0 ? fmt_mib(o.expert_mib) + " MiB" + o.expert_size_source
                                            : std::string("unknown (give -m MODEL or --expert-mib for byte columns)");
  outf("expert size %s; %s\n\n", size.c_str(),
       o.warm ? "cache kept warm across sequences" : "each sequence starts with a cold cache");
  outf("%-10s %12s %9s %8s %14s %10s\n", "policy", "budget MiB", "per-layer", "hit %", "MiB read/token",
              "evictions");
  for (const auto& r : results) {
    const std::string k = r.per_layer_k ? std::to_string(r.per_layer_k) : "-";
    const bool bytes = r.expert_bytes > 0;
    char budget[32] = "-", per_token[32] = "-";
    if (bytes) {
      std::snprintf(budget, sizeof budget, "%.0f", static_cast<double>(r.budget_bytes) / static_cast<double>(moe::kMiB));
      std::snprintf(per_token, sizeof per_token, "%.1f", r.mib_read_per_token());
    }
    outf("%-10s %12s %9s %8.2f %14s %10llu\n", r.policy.c_str(), budget, k.c_str(), 100.0 * r.hit_rate(), per_token,
         static_cast<unsigned long long>(r.evictions));
  }
}

void print_json(const std::vector<moe::RouteTrace>& traces, const std::vector<moe::CacheSimResult>& results,
                const CacheSimCliOptions& o) {
  nlohmann::json j;
  const auto known = [](bool k, double v) { return k ? nlohmann::json(v) : nlohmann::json(nullptr); };
  j["expert_mib"] = known(o.expert_mib > 0, o.expert_mib);
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
                            {"budget_mib", known(r.expert_bytes > 0, static_cast<double>(r.budget_bytes) /
                                                                         static_cast<double>(moe::kMiB))},
                            {"per_layer_k", r.per_layer_k},
                            {"tokens", r.tokens},
                            {"lookups", r.lookups},
                            {"hits", r.hits},
                            {"misses", r.misses},
                            {"evictions", r.evictions},
                            {"hit_rate", r.hit_rate()},
                            {"mib_read_per_token", known(r.expert_bytes > 0, r.mib_read_per_token())}});
  }
  outf("%s\n", j.dump(2).c_str());
}

void run_cache_sim(CacheSimCliOptions& o, bool expert_mib_given) {
  if (expert_mib_given && (!(o.expert_mib > 0) || !std::isfinite(o.expert_mib))) {
    throw Error("--expert-mib: must be a positive number of MiB (got " + std::to_string(o.expert_mib) + ")");
  }
  if (o.cache_mb.empty() && o.per_layer.empty()) {
    throw Error("cache-sim: give --cache-mb N[,N...] and/or --per-layer K[,K...]");
  }
  if (!o.model.empty()) o.expert_mib = model_expert_mib(o.model, o.expert_size_source);
  if (!o.cache_mb.empty() && !(o.expert_mib > 0))
    throw Error("--cache-mb: a budget in MiB needs the expert size: give -m MODEL or --expert-mib X");
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
  CLI::Option* m = cmd->add_option("-m,--model", opts->model, "GGUF model: read the expert size (gate+up+down) from it");
  CLI::Option* mib =
      cmd->add_option("--expert-mib", opts->expert_mib, "bytes of one expert (gate+up+down) in MiB, e.g. 94.5");
  m->excludes(mib);
  mib->excludes(m);
  cmd->add_option("--cache-mb", opts->cache_mb, "global LRU budgets in MiB, comma separated")->delimiter(',');
  cmd->add_option("--per-layer", opts->per_layer, "per-layer LRU capacities in experts, comma separated")
      ->delimiter(',');
  cmd->add_flag("--warm", opts->warm, "keep the cache across sequences and trace files (default: cold per sequence)");
  cmd->add_flag("--json", opts->json, "print the results as JSON");
  cmd->footer(
      "Examples:\n"
      "  sluice run -m model.gguf -p 'Once upon a time' -n 256 --route-trace trace.jsonl\n"
      "  sluice cache-sim --trace trace.jsonl -m model.gguf --cache-mb 0,2000,8000 --per-layer 8,16\n"
      "  sluice cache-sim --trace trace.jsonl --per-layer 8,16   # hit rates only; no expert size needed");
  cmd->callback([opts, mib] { run_cache_sim(*opts, mib->count() > 0); });
}

}  // namespace sluice::cli
