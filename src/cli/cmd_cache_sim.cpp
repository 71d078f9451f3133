// `sluice cache-sim`: replays routing traces through the expert cache (the
// same LRU code the engine uses, or LRU-2 / Bélády's MIN: --policy) and
// prints, per budget, the hit rate, the expert bytes read per token and the
// evictions. The expert size comes from --expert-mib or the model (-m);
// per-layer capacities need neither (their byte columns are then "-").
// --replay-onto maps the traces onto a model as --route-replay does (its
// experts, top-k and expert size), so its figures predict a replayed bench;
// --cache-warm starts the cache from a saved expert-usage profile.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "moe/cache_budget.h"
#include "moe/cache_sim.h"
#include "moe/expert_usage.h"
#include "moe/route_replay.h"
#include "moe/route_trace.h"
#include "tools/model_info.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::cli {
namespace {

struct CacheSimCliOptions {
  std::vector<std::string> traces;
  std::string model;        // -m: read the expert size from this GGUF
  std::string replay_onto;  // --replay-onto MODEL: map the traces onto it (and read its expert size)
  uint64_t tokens = 0;      // --tokens N (with --replay-onto): replay N tokens (0: the trace's own count)
  double expert_mib = 0;    // --expert-mib, or from the model; 0: unknown (per-layer only)
  std::string expert_size_source;  // how expert_mib was found, for the table
  std::vector<std::string> cache_mb;
  std::vector<int> per_layer;
  std::vector<std::string> policies = {"lru"};
  std::string cache_warm;  // --cache-warm FILE (expert-usage profile)
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
  if (n == 0) throw Error(path + ": the model has no routed experts to size a cache for");
  source = lo == hi ? " (from " + path + ")"
                    : " (mean over the layers of " + path + ", which range " +
                          fmt_mib(static_cast<double>(lo) / static_cast<double>(moe::kMiB)) + ".." +
                          fmt_mib(static_cast<double>(hi) / static_cast<double>(moe::kMiB)) + " MiB)";
  return static_cast<double>(sum) / static_cast<double>(n) / static_cast<double>(moe::kMiB);
}

// The traces as `--route-replay` would route them on `model_path`: one
// sluice-format trace of `tokens` positions (0: each complete trace token
// once), every MoE layer of the model, the model's experts and top-k.
// The replay flattens the trace's sequences into one stream, as the engine's
// replay does.
moe::RouteTrace replay_onto_model(const moe::RouteTrace& trace, const std::string& model_path, uint64_t tokens) {
  const gguf::GgufModel g = gguf::GgufModel::open(model_path);
  const model::HParams hp = model::describe_architecture(g).hp;
  if (!hp.is_moe()) throw Error("--replay-onto " + model_path + ": a dense model has no experts to cache");
  const std::vector<moe::MoeLayerShape> shapes =
      moe::moe_layer_shapes(gguf::layer_expert_parts(g), static_cast<int>(hp.n_expert_used));
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
    outf("trace %s\n", t.summary().c_str());
  }
  const std::string size = o.expert_mib > 0 ? fmt_mib(o.expert_mib) + " MiB" + o.expert_size_source
                                            : std::string("unknown (give -m MODEL or --expert-mib for byte columns)");
  outf("expert size %s; %s\n\n", size.c_str(),
       o.warm ? "cache kept warm across sequences" : "each sequence starts with a cold cache");
  outf("%-10s %-8s %12s %9s %8s %14s %10s %10s\n", "policy", "eviction", "budget MiB", "per-layer", "hit %",
       "MiB read/token", "evictions", "preloaded");
  for (const auto& r : results) {
    const std::string k = r.per_layer_k ? std::to_string(r.per_layer_k) : "-";
    const bool bytes = r.expert_bytes > 0;
    char budget[32] = "-", per_token[32] = "-";
    if (bytes) {
      std::snprintf(budget, sizeof budget, "%.0f", static_cast<double>(r.budget_bytes) / static_cast<double>(moe::kMiB));
      std::snprintf(per_token, sizeof per_token, "%.1f", r.mib_read_per_token());
    }
    outf("%-10s %-8s %12s %9s %8.2f %14s %10llu %10llu\n", r.policy.c_str(), r.eviction.c_str(), budget, k.c_str(),
         100.0 * r.hit_rate(), per_token, static_cast<unsigned long long>(r.evictions),
         static_cast<unsigned long long>(r.preloaded));
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
                            {"eviction", r.eviction},
                            {"preloaded", r.preloaded},
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
  outf("%s\n", json_text(j, 2).c_str());
}

void run_cache_sim(CacheSimCliOptions& o, bool expert_mib_given) {
  if (expert_mib_given && (!(o.expert_mib > 0) || !std::isfinite(o.expert_mib))) {
    throw Error("--expert-mib: must be a positive number of MiB (got " + std::to_string(o.expert_mib) + ")");
  }
  if (o.cache_mb.empty() && o.per_layer.empty()) {
    throw Error("cache-sim: give --cache-mb N[,N...] and/or --per-layer K[,K...]");
  }
  if (o.tokens && o.replay_onto.empty()) throw Error("--tokens: only applies with --replay-onto");
  const std::string& sized_by = o.replay_onto.empty() ? o.model : o.replay_onto;
  if (!sized_by.empty() && !expert_mib_given) o.expert_mib = model_expert_mib(sized_by, o.expert_size_source);
  if (!o.cache_mb.empty() && !(o.expert_mib > 0))
    throw Error("--cache-mb: a budget in MiB needs the expert size: give -m MODEL or --expert-mib X");
  std::vector<moe::RouteTrace> traces = moe::read_route_traces(o.traces);
  if (!o.replay_onto.empty())
    for (moe::RouteTrace& t : traces) t = replay_onto_model(t, o.replay_onto, o.tokens);
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
  CLI::Option* m = cmd->add_option("-m,--model", opts->model, "GGUF model: read the expert size (gate+up+down) from it")
                       ->transform(model_reference("-m"));
  CLI::Option* onto = cmd->add_option("--replay-onto", opts->replay_onto,
                                      "GGUF model: map the traces onto it as --route-replay does (its experts, top-k "
                                      "and expert size), one stream of tokens")
                           ->transform(model_reference("--replay-onto"));
  CLI::Option* mib =
      cmd->add_option("--expert-mib", opts->expert_mib, "bytes of one expert (gate+up+down) in MiB, e.g. 94.5");
  m->excludes(mib);
  mib->excludes(m);
  m->excludes(onto);
  onto->excludes(m);
  cmd->add_option("--tokens", opts->tokens, "with --replay-onto: replay this many tokens (wrapping; 0: the trace's own)");
  cmd->add_option("--policy", opts->policies,
                  "eviction policies for --cache-mb: lru, lru-2, min (Belady's offline optimum), comma separated")
      ->delimiter(',');
  cmd->add_option("--cache-warm", opts->cache_warm,
                  "start each cold cache filled with the most used experts of an expert-usage profile "
                  "(`sluice run --save-usage FILE`)");
  cmd->add_option("--cache-mb", opts->cache_mb, "global budgets in MiB, comma separated")->delimiter(',');
  cmd->add_option("--per-layer", opts->per_layer, "per-layer LRU capacities in experts, comma separated")
      ->delimiter(',');
  cmd->add_flag("--warm", opts->warm, "keep the cache across sequences and trace files (default: cold per sequence)");
  cmd->add_flag("--json", opts->json, "print the results as JSON");
  cmd->footer(
      "Examples:\n"
      "  sluice run -m model.gguf -p 'Once upon a time' -n 256 --route-trace trace.jsonl\n"
      "  sluice cache-sim --trace trace.jsonl -m model.gguf --cache-mb 0,2000,8000 --per-layer 8,16\n"
      "  sluice cache-sim --trace trace.jsonl --per-layer 8,16   # hit rates only; no expert size needed\n"
      "  sluice cache-sim --trace mixtral.jsonl --replay-onto model.gguf --cache-mb 500 --policy lru,min");
  cmd->callback([opts, mib] { run_cache_sim(*opts, mib->count() > 0); });
}

}  // namespace sluice::cli
