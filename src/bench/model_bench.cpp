// model_bench — the measurement loop, derived figures and the ceiling input.
// Output formats live in model_bench_format.cpp.
#include "bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bench/flag_list.h"
#include "gguf/gguf.h"
#include "io/residency.h"
#include "model/arch.h"
#include "moe/cache_budget.h"
#include "moe/trim_config.h"
#include "moe/expert_store.h"
#include "runtime/engine_options.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/machine_conditions.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/proc_memory.h"

namespace sluice::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sample mean and standard deviation (n-1 denominator; 0 for one value).
void mean_sd(const std::vector<double>& v, double& mean, double& sd) {
  mean = 0;
  sd = 0;
  if (v.empty()) return;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  if (v.size() < 2) return;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
}

// Token ids a random prompt may use: every id that is not a control, unknown
// or end-of-generation token (those change the model's behaviour, and a
// benchmark should look like text). Falls back to every id when the file has
// no usable tokenizer.
std::vector<int32_t> prompt_token_pool(const gguf::GgufModel& gguf, int n_vocab) {
  std::vector<int32_t> pool;
  try {
    const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(gguf.metadata());
    const int32_t n = std::min(n_vocab, tok.n_vocab());
    for (int32_t id = 0; id < n; ++id) {
      if (!tok.is_control(id) && !tok.is_eog(id) && id != tok.bos() && id != tok.pad()) pool.push_back(id);
    }
  } catch (const Error&) {
    pool.clear();
  }
  if (pool.empty()) {
    for (int32_t id = 0; id < n_vocab; ++id) pool.push_back(id);
  }
  return pool;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The engine settings of one point, as `sluice run` would receive them, so
// that bench validates and converts them with the engine's own code.
runtime::EngineOptions engine_options_for(const ModelBenchConfig& cfg, const BenchPoint& pt) {
  runtime::EngineOptions o;
  o.model_path = cfg.model_path;
  o.threads = pt.threads;
  o.dense_weights = pt.dense_weights;
  o.resident_layout = pt.resident_layout;
  o.no_odirect = !cfg.odirect;
  o.io_threads = pt.io_threads;
  o.load_all = cfg.load_all;
  o.kv_type = cfg.kv_type;
  o.n_ctx = cfg.n_prompt + cfg.n_gen + 1 + pt.mtp;  // room for the last verify's drafts
  o.trims.expert_budget = pt.expert_budget;
  o.trims.top_k = pt.moe_top_k;
  o.cache_mb = pt.cache_mb;
  o.prefetch = pt.prefetch;
  o.route_replay = cfg.route_replay;
  o.io_engine = cfg.io_engine;
  o.io_depth = cfg.io_depth;
  return o;
}

// The per-layer expert shapes the engine sizes its cache floor from (the
// same moe::moe_layer_shapes as model::Transformer, either file layout). The
// check at load stays the authority; this one only fails a sweep before its
// first point runs.
std::vector<moe::MoeLayerShape> cache_floor_shapes(const gguf::GgufModel& g, const model::HParams& hp) {
  return moe::moe_layer_shapes(gguf::layer_expert_parts(g), static_cast<int>(hp.n_expert_used));
}

void validate(const ModelBenchConfig& cfg) {
  if (cfg.model_path.empty()) throw Error("-m: no model file given");
  if (cfg.n_prompt < 1) throw Error("-p: prompt length must be >= 1 (got " + std::to_string(cfg.n_prompt) + ")");
  if (cfg.n_gen < 1) throw Error("-n: decode steps must be >= 1 (got " + std::to_string(cfg.n_gen) + ")");
  if (cfg.reps < 1) throw Error("-r: repetitions must be >= 1 (got " + std::to_string(cfg.reps) + ")");
  if (cfg.threads.empty()) throw Error("-t: no thread counts given");
  if (cfg.io_threads.empty()) throw Error("--io-threads: no lane counts given");
  if (cfg.dense_weights.empty()) throw Error("--dense-weights: no modes given");
  if (cfg.resident_layout.empty()) throw Error("--resident-layout: no layouts given");
  if (cfg.moe_top_k.empty()) throw Error("--moe-top-k: no values given");
  if (cfg.cache_mb.empty()) throw Error("--cache-mb: no budgets given");
  // Every value the way the engine checks it (errors name the engine flag).
  // An auto budget is checked as a setting only: it is sized from memory when
  // its point runs, and sizing it here too would repeat its log lines.
  for (const BenchPoint& pt : bench_points(cfg)) {
    runtime::EngineOptions o = engine_options_for(cfg, pt);
    if (moe::parse_cache_mb(o.cache_mb).automatic) o.cache_mb = "off";
    (void)o.to_model_config();
  }

  // What needs the model's metadata: top-k against the expert count, fixed
  // budgets against the floor.
  const gguf::GgufModel g = gguf::GgufModel::open(cfg.model_path);
  const model::HParams hp = model::describe_architecture(g).hp;
  if (!hp.is_moe()) return;
  for (int k : cfg.moe_top_k) {
    moe::TrimConfig trims;
    trims.top_k = k;
    moe::effective_top_k(trims, static_cast<int>(hp.n_expert_used), static_cast<int>(hp.n_expert));
  }
  if (cfg.load_all) return;  // the cache is off with every expert resident
  const std::vector<moe::MoeLayerShape> shapes = cache_floor_shapes(g, hp);
  for (const std::string& c : cfg.cache_mb) {
    const moe::CacheMbSetting setting = moe::parse_cache_mb(c);
    if (!setting.automatic) moe::check_cache_floor(setting.mib * moe::kMiB, shapes, /*ubatch=*/1);
  }
}

void progress(const ModelBenchConfig& cfg, const std::string& line) {
  if (cfg.on_progress) cfg.on_progress(line);
}

ModelBenchRow run_point(const ModelBenchConfig& cfg, const BenchPoint& pt, std::optional<uint64_t> mem_cap,
                        moe::ExpertUsage& usage) {
  // Converted just before loading: --cache-mb auto sizes from memory as it is now.
  model::ModelConfig mc = engine_options_for(cfg, pt).to_model_config();
  mc.mtp = pt.mtp > 0;
  mc.log = nullptr;
  if (cfg.on_progress) mc.log = [&cfg](const std::string& line) { cfg.on_progress("  " + line); };

  reset_peak_rss();
  runtime::Session session = runtime::Session::open(cfg.model_path, mc);
  if (pt.mtp > 0) {
    runtime::MtpOptions mo;
    mo.depth = pt.mtp;
    session.set_mtp(mo);
  }
  const std::vector<int32_t> pool = prompt_token_pool(session.gguf(), session.n_vocab());

  ModelBenchRow row;
  row.model = std::filesystem::path(cfg.model_path).filename().string();
  row.load1 = read_machine_conditions().load1;
  row.point = pt;
  row.odirect = cfg.odirect;
  row.load_all = cfg.load_all;
  row.cold = cfg.cold;
  row.io_engine = cfg.io_engine;
  row.io_depth = cfg.io_engine == "uring" ? cfg.io_depth : 0;
  if (!cfg.route_replay.empty()) row.route_replay = std::filesystem::path(cfg.route_replay).filename().string();
  row.n_prompt = cfg.n_prompt;
  row.n_gen = cfg.n_gen;
  row.reps = cfg.reps;
  const model::HParams& hp = session.model().hparams();
  row.moe_top_k = hp.is_moe() ? moe::effective_top_k(mc.trims, static_cast<int>(hp.n_expert_used),
                                                      static_cast<int>(hp.n_expert))
                              : 0;
  row.cache_MiB = static_cast<double>(session.model().stats().io.cache_budget_bytes) / static_cast<double>(moe::kMiB);
  row.mem_cap_MiB = mem_cap ? static_cast<double>(*mem_cap) / static_cast<double>(moe::kMiB) : kNaN;

  std::vector<double> pp_tps, tg_tps;
  model::PrefetchCounters decode_pf;  // decode's share, summed over reps (used, needed, experts)
  model::PrefetchCounters prefill_pf;  // prefill's share, likewise
  double decode_stall_s_sum = 0, decode_matmul_s_sum = 0;  // over reps
  uint64_t mtp_drafted = 0, mtp_accepted = 0, mtp_forwards = 0;  // --mtp, summed over reps
  for (int rep = 0; rep < cfg.reps; ++rep) {
    // Same prompts for every configuration: the RNG depends on (seed, rep) only.
    std::mt19937_64 rng(cfg.seed * 1000003u + static_cast<uint64_t>(rep));
    std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
    std::vector<int32_t> prompt(static_cast<size_t>(cfg.n_prompt));
    for (int32_t& id : prompt) id = pool[pick(rng)];

    session.reset();
    if (cfg.cold) {
      for (const std::string& p : session.gguf().paths()) io::drop_file_pages(p);
    }

    double pp_s = 0, tg_s = 0;
    int decoded = cfg.n_gen;
    model::ModelStats stats_before;
    const model::ModelStats stats_start = session.model().stats();
    if (pt.mtp == 0) {
      auto t0 = std::chrono::steady_clock::now();
      std::span<const float> logits = session.feed(prompt);
      pp_s = seconds_since(t0);
      stats_before = session.model().stats();
      t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < cfg.n_gen; ++i) {
        const int32_t next[1] = {argmax(logits)};
        logits = session.feed(next);
      }
      tg_s = seconds_since(t0);
    } else {
      // Greedy generation with drafts: n_gen tokens after the first, which
      // comes from the prefill (as the loop above evaluates n_gen tokens).
      const telemetry::MtpCounters mtp_before = session.mtp_counters();
      runtime::Sampler greedy(runtime::SamplerConfig{});
      bool first = true;
      const runtime::GenerationStats st = session.generate(prompt, cfg.n_gen + 1, greedy, [&](int32_t) {
        if (first) stats_before = session.model().stats();
        first = false;
        return true;
      });
      pp_s = st.prefill_seconds;
      tg_s = st.decode_seconds;
      decoded = st.decode_tokens;
      mtp_drafted += session.mtp_counters().drafted - mtp_before.drafted;
      mtp_accepted += session.mtp_counters().accepted - mtp_before.accepted;
      mtp_forwards += session.mtp_counters().steps - mtp_before.steps + session.mtp_counters().plain_steps -
                      mtp_before.plain_steps;
    }
    const moe::ExpertIoStats& before = stats_before.io;
    const model::ModelStats stats_after = session.model().stats();
    const moe::ExpertIoStats& after = stats_after.io;
    decode_pf.used += stats_after.prefetch_counters.used - stats_before.prefetch_counters.used;
    decode_pf.needed += stats_after.prefetch_counters.needed - stats_before.prefetch_counters.needed;
    decode_pf.experts += stats_after.prefetch_counters.experts - stats_before.prefetch_counters.experts;
    prefill_pf.used += stats_before.prefetch_counters.used - stats_start.prefetch_counters.used;
    prefill_pf.needed += stats_before.prefetch_counters.needed - stats_start.prefetch_counters.needed;
    row.prefill_stall_s += stats_before.time.expert_io_s - stats_start.time.expert_io_s;
    row.prefill_matmul_s += stats_before.time.expert_matmul_s - stats_start.time.expert_matmul_s;
    const double decode_stall_s = stats_after.time.expert_io_s - stats_before.time.expert_io_s;
    const double decode_matmul_s = stats_after.time.expert_matmul_s - stats_before.time.expert_matmul_s;
    decode_stall_s_sum += decode_stall_s;
    decode_matmul_s_sum += decode_matmul_s;

    pp_tps.push_back(pp_s > 0 ? cfg.n_prompt / pp_s : kNaN);
    tg_tps.push_back(tg_s > 0 ? decoded / tg_s : kNaN);
    row.decode_tokens += static_cast<uint64_t>(decoded);
    row.decode_seconds += tg_s;
    row.decode_bytes_read += after.bytes_read - before.bytes_read;
    row.decode_reads += after.reads - before.reads;
    row.decode_experts_read += after.experts_read - before.experts_read;
    row.decode_experts_hit += after.experts_hit - before.experts_hit;
    row.decode_experts_unused += after.experts_unused - before.experts_unused;
    row.decode_io_seconds += after.io_seconds - before.io_seconds;

    char buf[200];
    const double per_tok_ms = decoded > 0 ? 1e3 / decoded : 0.0;
    std::snprintf(buf, sizeof buf,
                  "  rep %d/%d: pp %.2f tok/s, tg %.2f tok/s, %.1f MiB read in decode "
                  "(per token: expert matmul %.2f ms, read wait %.2f ms)",
                  rep + 1, cfg.reps, pp_tps.back(), tg_tps.back(), (after.bytes_read - before.bytes_read) / 1048576.0,
                  decode_matmul_s * per_tok_ms, decode_stall_s * per_tok_ms);
    progress(cfg, buf);
  }
  mean_sd(pp_tps, row.prefill_tps, row.prefill_tps_sd);
  mean_sd(tg_tps, row.decode_tps, row.decode_tps_sd);
  row.peak_rss_MiB = peak_rss_mib();
  row.anon_huge_MiB = static_cast<double>(read_machine_conditions().anon_huge_bytes) / 1048576.0;
  row.prefetch_depth = session.model().stats().prefetch;
  row.prefill_prefetch_depth = session.model().stats().prefill_prefetch;
  row.prefill_stall_s /= cfg.reps;
  row.prefill_matmul_s /= cfg.reps;
  row.decode_stall_ms_per_tok = row.decode_tokens ? 1e3 * decode_stall_s_sum / row.decode_tokens : kNaN;
  row.decode_matmul_ms_per_tok = row.decode_tokens ? 1e3 * decode_matmul_s_sum / row.decode_tokens : kNaN;
  row.prefill_prefetch_coverage_pct =
      row.prefill_prefetch_depth > 0 && prefill_pf.needed ? 100.0 * prefill_pf.coverage() : kNaN;
  // NaN (not 0) where prefetch was off or had nothing to count.
  const bool pf = row.prefetch_depth > 0;
  row.prefetch_precision_pct = pf && decode_pf.experts ? 100.0 * decode_pf.precision() : kNaN;
  row.prefetch_coverage_pct = pf && decode_pf.needed ? 100.0 * decode_pf.coverage() : kNaN;
  row.mtp_accept_pct = pt.mtp > 0 && mtp_drafted ? 100.0 * static_cast<double>(mtp_accepted) / mtp_drafted : kNaN;
  row.tokens_per_forward = pt.mtp > 0 ? (mtp_forwards ? static_cast<double>(row.decode_tokens) / mtp_forwards : kNaN)
                                      : 1.0;
  row.experts_read_per_token =
      row.decode_tokens ? static_cast<double>(row.decode_experts_read) / static_cast<double>(row.decode_tokens) : kNaN;
  derive_figures(row, cfg.ceiling);
  if (!cfg.save_usage.empty()) {
    const moe::ExpertUsage u = session.model().expert_usage();
    if (usage.counts.empty()) {
      usage = u;
    } else if (u.counts.size() == usage.counts.size()) {
      for (size_t i = 0; i < u.counts.size(); ++i) usage.counts[i] += u.counts[i];
      usage.tokens += u.tokens;
    }
  }
  return row;
}

// Replaces every point by one copy per value of `values` (in order) with
// `field` set to it: applied outermost first, this builds the product.
template <class T>
void sweep(std::vector<BenchPoint>& points, const std::vector<T>& values, T BenchPoint::*field) {
  std::vector<BenchPoint> out;
  out.reserve(points.size() * values.size());
  for (const BenchPoint& p : points) {
    for (const T& v : values) {
      out.push_back(p);
      out.back().*field = v;
    }
  }
  points = std::move(out);
}

IoMode mode_of(const std::string& s, const std::string& where) {
  if (s == "direct") return IoMode::Direct;
  if (s == "buffered") return IoMode::Buffered;
  fail(where, "unknown mode '" + s + "' (expected direct or buffered)");
}

}  // namespace

std::vector<BenchPoint> bench_points(const ModelBenchConfig& cfg) {
  std::vector<BenchPoint> points(1);
  sweep(points, cfg.threads, &BenchPoint::threads);
  sweep(points, cfg.io_threads, &BenchPoint::io_threads);
  sweep(points, cfg.dense_weights, &BenchPoint::dense_weights);
  sweep(points, cfg.resident_layout, &BenchPoint::resident_layout);
  sweep(points, cfg.moe_top_k, &BenchPoint::moe_top_k);
  sweep(points, cfg.cache_mb, &BenchPoint::cache_mb);
  sweep(points, cfg.prefetch, &BenchPoint::prefetch);
  sweep(points, cfg.expert_budget, &BenchPoint::expert_budget);
  sweep(points, cfg.mtp, &BenchPoint::mtp);
  return points;
}

void derive_figures(ModelBenchRow& r, const std::vector<IoBenchRow>& ceiling) {
  const double bytes = static_cast<double>(r.decode_bytes_read);
  r.mib_read_per_token = r.decode_tokens ? bytes / 1048576.0 / static_cast<double>(r.decode_tokens) : kNaN;
  r.read_GBps = r.decode_seconds > 0 ? bytes / r.decode_seconds / 1e9 : kNaN;
  // Reads that can be in flight at once: the lanes, or the uring depth (its
  // io time sums each read's submit-to-completion latency).
  const int concurrency = r.io_depth > 0 ? r.io_depth : r.point.io_threads;
  const double lane_busy_s = r.decode_io_seconds / std::max(1, concurrency);
  r.read_GBps_io = lane_busy_s > 0 ? bytes / lane_busy_s / 1e9 : kNaN;
  r.lane_busy_pct = lane_busy_s > 0 && r.decode_seconds > 0 ? 100.0 * lane_busy_s / r.decode_seconds : kNaN;
  // Demand only: a mispredicted prefetch read was read, but nobody asked for it.
  const uint64_t asked = r.decode_experts_read - std::min(r.decode_experts_unused, r.decode_experts_read) +
                         r.decode_experts_hit;
  r.cache_hit_pct = asked ? 100.0 * static_cast<double>(r.decode_experts_hit) / static_cast<double>(asked) : kNaN;
  r.read_size_bytes = r.decode_reads ? bytes / static_cast<double>(r.decode_reads) : kNaN;

  r.ceiling_GBps = r.io_efficiency = r.roofline_efficiency = kNaN;
  if (ceiling.empty() || !(r.read_size_bytes > 0)) return;
  const IoMode want = r.odirect ? IoMode::Direct : IoMode::Buffered;
  const bool have_mode = std::any_of(ceiling.begin(), ceiling.end(), [&](const IoBenchRow& c) { return c.mode == want; });
  if (!have_mode) return;
  r.ceiling_GBps = ceiling_GBps(ceiling, static_cast<uint64_t>(std::llround(r.read_size_bytes)), r.point.io_threads,
                                r.odirect);
  if (!(r.ceiling_GBps > 0)) {
    r.ceiling_GBps = kNaN;
    return;
  }
  r.io_efficiency = r.read_GBps_io / r.ceiling_GBps;  // NaN propagates when there was no io time
  const double gb_per_token = bytes / 1e9 / static_cast<double>(r.decode_tokens);
  r.roofline_efficiency = r.decode_tps / (r.ceiling_GBps / gb_per_token);
}

std::vector<ModelBenchRow> run_model_bench(const ModelBenchConfig& cfg) {
  validate(cfg);
  const std::vector<BenchPoint> points = bench_points(cfg);
  const std::optional<uint64_t> mem_cap = process_cgroup_memory().limit;  // fixed for the process's life
  std::vector<ModelBenchRow> rows;
  moe::ExpertUsage usage;
  for (size_t i = 0; i < points.size(); ++i) {
    const BenchPoint& p = points[i];
    progress(cfg, "config " + std::to_string(i + 1) + "/" + std::to_string(points.size()) + ": threads " +
                      std::to_string(p.threads) + ", io-threads " + std::to_string(p.io_threads) +
                      ", dense-weights " + p.dense_weights + ", moe-top-k " +
                      (p.moe_top_k > 0 ? std::to_string(p.moe_top_k) : "model") + ", cache-mb " + p.cache_mb);
    rows.push_back(run_point(cfg, p, mem_cap, usage));
  }
  if (!cfg.save_usage.empty()) {
    if (usage.n_layer == 0) throw Error("--save-usage: a dense model routes no experts");
    usage.model = std::filesystem::path(cfg.model_path).filename().string();
    io::OutputOptions out{.flag = "--save-usage", .inputs = gguf::model_file_paths(cfg.model_path)};
    out.inputs.push_back(cfg.route_replay);
    moe::write_expert_usage(usage, cfg.save_usage, std::move(out));
  }
  return rows;
}

std::vector<IoBenchRow> parse_io_bench_json(std::string_view text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(where, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_array()) fail(where, "expected a JSON array of io bench rows (from `sluice bench --io FILE -o json`)");
  std::vector<IoBenchRow> rows;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& o = j[i];
    const std::string at = where + ": row " + std::to_string(i);
    if (!o.is_object()) fail(at, "is not an object");
    for (const char* key : {"mode", "size_bytes", "lanes", "GBps"}) {
      if (!o.contains(key)) fail(at, std::string("missing \"") + key + "\"");
    }
    if (!o["mode"].is_string()) fail(at, "\"mode\" is not a string");
    if (!o["size_bytes"].is_number_unsigned() || !o["lanes"].is_number_integer() || !o["GBps"].is_number()) {
      fail(at, "\"size_bytes\", \"lanes\" and \"GBps\" must be numbers");
    }
    IoBenchRow r;
    r.mode = mode_of(o["mode"].get<std::string>(), at);
    r.size_bytes = o["size_bytes"].get<uint64_t>();
    r.lanes = o["lanes"].get<int>();
    // Written by io benches before --io-engine: pread.
    if (o.contains("engine")) {
      if (!o["engine"].is_string()) fail(at, "\"engine\" is not a string");
      r.engine = io::parse_io_engine(o["engine"].get<std::string>(), at);
    }
    r.GBps = o["GBps"].get<double>();
    if (r.size_bytes == 0 || r.lanes < 1 || !(r.GBps >= 0)) fail(at, "size_bytes, lanes must be > 0 and GBps >= 0");
    rows.push_back(r);
  }
  if (rows.empty()) fail(where, "holds no io bench rows");
  return rows;
}

std::vector<IoBenchRow> load_io_ceiling(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("--io-ceiling: cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_io_bench_json(ss.str(), "--io-ceiling " + path);
}

std::vector<IoBenchRow> measure_ceiling(const std::string& model_path, const std::vector<int>& lanes, bool direct,
                                        double seconds, const std::function<void(const IoBenchRow&)>& on_row) {
  const gguf::GgufModel model = gguf::GgufModel::open(model_path);
  IoBenchConfig io;
  io.path = model.paths().front();
  io.sizes = expert_slice_sizes(model);
  if (io.sizes.empty()) fail(model_path, "has no expert tensors (*_exps), so there is no expert read ceiling to measure");
  io.lanes = lanes;
  std::sort(io.lanes.begin(), io.lanes.end());
  io.lanes.erase(std::unique(io.lanes.begin(), io.lanes.end()), io.lanes.end());
  io.modes = {direct ? IoMode::Direct : IoMode::Buffered};
  io.seconds_per_point = seconds;
  io.on_row = on_row;
  return run_io_bench(io);
}

std::vector<int> parse_int_list(std::string_view csv, const std::string& flag, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& part : split_flag_list(csv, flag)) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size()) fail(flag, "'" + part + "' is not an integer");
    if (v < lo || v > hi) {
      fail(flag, "'" + part + "' is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    out.push_back(static_cast<int>(v));
  }
  return out;
}

std::vector<std::string> parse_dense_list(std::string_view csv, const std::string& flag) {
  std::vector<std::string> out = split_flag_list(csv, flag);
  for (const std::string& part : out) {
    if (part != "mmap" && part != "warm" && part != "anon") {
      fail(flag, "'" + part + "' is not a dense-weight mode (expected mmap, warm or anon)");
    }
  }
  return out;
}

std::vector<std::string> parse_layout_list(std::string_view csv) {
  std::vector<std::string> out = split_flag_list(csv, "--resident-layout");
  for (const std::string& part : out) model::parse_resident_layout(part);  // Error names the flag
  return out;
}

std::vector<std::string> parse_cache_mb_list(std::string_view csv) {
  std::vector<std::string> out;
  for (const std::string& part : split_flag_list(csv, "--cache-mb")) {
    const moe::CacheMbSetting c = moe::parse_cache_mb(part);
    out.push_back(c.automatic ? "auto" : c.mib == 0 ? "off" : std::to_string(c.mib));
  }
  return out;
}

std::vector<std::string> parse_prefetch_list(std::string_view csv) {
  std::vector<std::string> out;
  for (const std::string& part : split_flag_list(csv, "--prefetch")) {
    const int depth = runtime::parse_prefetch(part);
    out.push_back(depth == model::kPrefetchPrefill ? "prefill"
                  : depth == model::kPrefetchAuto  ? "auto"
                  : depth == 0                     ? "off"
                                                   : std::to_string(depth));
  }
  return out;
}

}  // namespace sluice::bench
