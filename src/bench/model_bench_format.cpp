// model_bench — output: markdown table, JSON rows, CSV.
//
// Markdown and CSV print fixed precision so the text is stable and diffable
// (CSV rows through util/csv.h, so a model name with a comma stays one field);
// JSON carries full doubles (NaN -> null). A figure that could not be computed
// is "n/a" in markdown, empty in CSV, null in JSON.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/model_bench.h"
#include "util/csv.h"
#include "util/decimal.h"
#include "util/json_text.h"

namespace sluice::bench {
namespace {

std::string fixed(double v, int decimals, const char* missing) {
  return std::isfinite(v) ? sluice::fixed(v, decimals) : missing;
}

std::string pct(double ratio) {
  if (!std::isfinite(ratio)) return "n/a";
  return fixed(ratio * 100.0, 1, "n/a") + "%";
}

std::string mean_sd(double mean, double sd) {
  if (!std::isfinite(mean)) return "n/a";
  return fixed(mean, 2, "n/a") + " ± " + fixed(sd, 2, "0.00");
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Columns added after the first release of the formats: appended to the CSV
// and JSON (so older columns keep their positions) and to the end of the
// markdown table. One entry feeds all three formats; a future swept setting
// is one more line here.
struct ExtraColumn {
  const char* key;         // CSV column and JSON key
  const char* md_title;    // markdown header
  const char* md_missing;  // markdown text for a missing (null) value
  nlohmann::json (*value)(const ModelBenchRow&);
};

const ExtraColumn kExtraColumns[] = {
    {"moe_top_k", "top-k", "n/a", [](const ModelBenchRow& r) { return nlohmann::json(r.moe_top_k); }},
    {"cache", "cache", "n/a", [](const ModelBenchRow& r) { return nlohmann::json(r.point.cache_mb); }},
    {"cache_MiB", "cache MiB", "n/a", [](const ModelBenchRow& r) { return num(r.cache_MiB); }},
    {"mem_cap_MiB", "cap MiB", "none", [](const ModelBenchRow& r) { return num(r.mem_cap_MiB); }},
    {"prefetch", "prefetch", "n/a", [](const ModelBenchRow& r) { return nlohmann::json(r.prefetch_depth); }},
    {"prefetch_prec_pct", "pf prec %", "n/a", [](const ModelBenchRow& r) { return num(r.prefetch_precision_pct); }},
    {"prefetch_cov_pct", "pf cov %", "n/a", [](const ModelBenchRow& r) { return num(r.prefetch_coverage_pct); }},
    {"lane_busy_pct", "lanes busy %", "n/a", [](const ModelBenchRow& r) { return num(r.lane_busy_pct); }},
    {"expert_budget", "budget", "off", [](const ModelBenchRow& r) { return nlohmann::json(r.point.expert_budget); }},
    {"experts_per_tok", "experts/tok", "n/a", [](const ModelBenchRow& r) { return num(r.experts_read_per_token); }},
    {"mtp", "mtp", "off", [](const ModelBenchRow& r) { return nlohmann::json(r.point.mtp); }},
    {"mtp_accept_pct", "mtp accept %", "n/a", [](const ModelBenchRow& r) { return num(r.mtp_accept_pct); }},
    {"tok_per_forward", "tok/forward", "n/a", [](const ModelBenchRow& r) { return num(r.tokens_per_forward); }},
    {"io_engine", "io engine", "n/a",
     [](const ModelBenchRow& r) {
       return nlohmann::json(r.io_depth > 0 ? r.io_engine + ":" + std::to_string(r.io_depth) : r.io_engine);
     }},
    // The routing trace replayed instead of the router (--route-replay); off: the router.
    {"route_replay", "route replay", "off",
     [](const ModelBenchRow& r) { return r.route_replay.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.route_replay); }},
    // Prefill: the prefetch depth in force for its micro-batches, the share of
    // its needed experts the prefetch delivered, and its expert I/O wait and
    // expert matmul milliseconds per rep (seconds at one decimal hide them).
    {"prefill_prefetch", "pp prefetch", "n/a", [](const ModelBenchRow& r) { return nlohmann::json(r.prefill_prefetch_depth); }},
    {"prefill_pf_cov_pct", "pp pf cov %", "n/a", [](const ModelBenchRow& r) { return num(r.prefill_prefetch_coverage_pct); }},
    {"prefill_stall_ms", "pp stall ms", "n/a", [](const ModelBenchRow& r) { return num(1e3 * r.prefill_stall_s); }},
    {"prefill_matmul_ms", "pp matmul ms", "n/a", [](const ModelBenchRow& r) { return num(1e3 * r.prefill_matmul_s); }},
    // Decode, per emitted token: expert read wait and expert matmul milliseconds.
    {"decode_stall_ms_tok", "tg stall ms/tok", "n/a", [](const ModelBenchRow& r) { return num(r.decode_stall_ms_per_tok); }},
    {"decode_matmul_ms_tok", "tg matmul ms/tok", "n/a", [](const ModelBenchRow& r) { return num(r.decode_matmul_ms_per_tok); }},
    // --resident-layout (packed or plain): which layout the resident weights were computed in.
    {"resident_layout", "layout", "n/a", [](const ModelBenchRow& r) { return nlohmann::json(r.point.resident_layout); }},
    // The conditions that move the figures: the load when the row started and
    // the process's transparent huge pages after it (MiB; 0: none).
    {"load1", "load", "n/a", [](const ModelBenchRow& r) { return num(r.load1); }},
    {"anon_huge_MiB", "THP MiB", "n/a", [](const ModelBenchRow& r) { return num(r.anon_huge_MiB); }},
};

// A value as CSV / markdown text: integers in full, other numbers with one
// decimal, booleans as 1/0, null as `missing`.
std::string cell(const nlohmann::json& v, const char* missing) {
  if (v.is_null()) return missing;
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number()) return fixed(v.get<double>(), 1, missing);
  if (v.is_string()) return v.get<std::string>();
  return json_text(v);
}

}  // namespace

std::string format_bench_markdown(const std::vector<ModelBenchRow>& rows) {
  std::string out =
      "| model | threads | io-threads | dense | pp tok/s | tg tok/s | MiB/tok | read GB/s | read GB/s (io) | hit % "
      "| peak RSS MiB | io eff | roofline eff |";
  std::string rule = "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|";
  for (const ExtraColumn& c : kExtraColumns) {
    out += std::string(" ") + c.md_title + " |";
    rule += "--:|";
  }
  out += "\n" + rule + "\n";
  for (const ModelBenchRow& r : rows) {
    out += "| " + r.model + " | " + std::to_string(r.point.threads) + " | " + std::to_string(r.point.io_threads) +
           " | " + r.point.dense_weights + " | " + mean_sd(r.prefill_tps, r.prefill_tps_sd) + " | " +
           mean_sd(r.decode_tps, r.decode_tps_sd) + " | " + fixed(r.mib_read_per_token, 2, "n/a") + " | " +
           fixed(r.read_GBps, 3, "n/a") + " | " + fixed(r.read_GBps_io, 3, "n/a") + " | " +
           fixed(r.cache_hit_pct, 1, "n/a") + " | " + fixed(r.peak_rss_MiB, 1, "n/a") + " | " +
           pct(r.io_efficiency) + " | " + pct(r.roofline_efficiency) + " |";
    for (const ExtraColumn& c : kExtraColumns) out += " " + cell(c.value(r), c.md_missing) + " |";
    out += "\n";
  }
  if (!rows.empty()) {
    const ModelBenchRow& r = rows.front();
    out += "\n> pp: " + std::to_string(r.n_prompt) + "-token random prompt; tg: " + std::to_string(r.n_gen) +
           " decode steps; " + std::to_string(r.reps) + " rep(s), mean ± sd; " +
           (r.odirect ? "O_DIRECT" : "buffered") + " expert reads" + (r.load_all ? ", all experts resident" : "") +
           (r.cold ? ", page cache dropped before each rep" : "") +
           ". read GB/s = decode bytes / decode wall time; (io) = decode bytes / (pread time / io-threads). "
           "io eff = read GB/s (io) / device ceiling; roofline eff = tg tok/s / (ceiling / GB per token). "
           "top-k: experts per token in force; cache: --cache-mb as swept, cache MiB: the budget it resolved to "
           "(0 = off); cap MiB: the cgroup memory limit the run was under.\n";
  }
  return out;
}

std::string format_bench_json(const std::vector<ModelBenchRow>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const ModelBenchRow& r : rows) {
    nlohmann::json o;
    o["model"] = r.model;
    o["threads"] = r.point.threads;
    o["io_threads"] = r.point.io_threads;
    o["dense_weights"] = r.point.dense_weights;
    o["odirect"] = r.odirect;
    o["load_all"] = r.load_all;
    o["cold"] = r.cold;
    o["n_prompt"] = r.n_prompt;
    o["n_gen"] = r.n_gen;
    o["reps"] = r.reps;
    o["prefill_tps"] = num(r.prefill_tps);
    o["prefill_tps_sd"] = num(r.prefill_tps_sd);
    o["decode_tps"] = num(r.decode_tps);
    o["decode_tps_sd"] = num(r.decode_tps_sd);
    o["decode_tokens"] = r.decode_tokens;
    o["decode_seconds"] = num(r.decode_seconds);
    o["decode_bytes_read"] = r.decode_bytes_read;
    o["decode_reads"] = r.decode_reads;
    o["decode_experts_read"] = r.decode_experts_read;
    o["decode_experts_hit"] = r.decode_experts_hit;
    o["decode_experts_unused"] = r.decode_experts_unused;
    o["decode_io_seconds"] = num(r.decode_io_seconds);
    o["mib_read_per_token"] = num(r.mib_read_per_token);
    o["read_GBps"] = num(r.read_GBps);
    o["read_GBps_io"] = num(r.read_GBps_io);
    o["cache_hit_pct"] = num(r.cache_hit_pct);
    o["peak_rss_MiB"] = num(r.peak_rss_MiB);
    o["read_size_bytes"] = num(r.read_size_bytes);
    o["ceiling_GBps"] = num(r.ceiling_GBps);
    o["io_efficiency"] = num(r.io_efficiency);
    o["roofline_efficiency"] = num(r.roofline_efficiency);
    for (const ExtraColumn& c : kExtraColumns) o[c.key] = c.value(r);
    arr.push_back(std::move(o));
  }
  return json_text(arr, 2) + "\n";
}

std::string format_bench_csv(const std::vector<ModelBenchRow>& rows) {
  std::string out =
      "model,threads,io_threads,dense_weights,odirect,load_all,cold,n_prompt,n_gen,reps,prefill_tps,prefill_tps_sd,"
      "decode_tps,decode_tps_sd,mib_read_per_token,read_GBps,read_GBps_io,cache_hit_pct,peak_rss_MiB,"
      "ceiling_GBps,io_efficiency,roofline_efficiency";
  for (const ExtraColumn& c : kExtraColumns) out += std::string(",") + c.key;
  out += "\n";
  for (const ModelBenchRow& r : rows) {
    std::vector<std::string> cells = {
        r.model, std::to_string(r.point.threads), std::to_string(r.point.io_threads), r.point.dense_weights,
        r.odirect ? "1" : "0", r.load_all ? "1" : "0", r.cold ? "1" : "0", std::to_string(r.n_prompt),
        std::to_string(r.n_gen), std::to_string(r.reps), fixed(r.prefill_tps, 3, ""), fixed(r.prefill_tps_sd, 3, ""),
        fixed(r.decode_tps, 3, ""), fixed(r.decode_tps_sd, 3, ""), fixed(r.mib_read_per_token, 4, ""),
        fixed(r.read_GBps, 4, ""), fixed(r.read_GBps_io, 4, ""), fixed(r.cache_hit_pct, 2, ""),
        fixed(r.peak_rss_MiB, 1, ""), fixed(r.ceiling_GBps, 4, ""), fixed(r.io_efficiency, 4, ""),
        fixed(r.roofline_efficiency, 4, "")};
    for (const ExtraColumn& c : kExtraColumns) cells.push_back(cell(c.value(r), ""));
    out += csv_join(cells) + "\n";
  }
  return out;
}

}  // namespace sluice::bench
