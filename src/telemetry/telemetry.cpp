#include "telemetry/telemetry.h"

#include <sys/resource.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <utility>
#include <vector>

#include "util/csv.h"
#include "util/decimal.h"
#include "util/error.h"

namespace sluice::telemetry {
namespace {

constexpr double kMiB = 1048576.0;

model::ExpertCounters minus(const model::ExpertCounters& a, const model::ExpertCounters& b) {
  model::ExpertCounters d;
  d.routed = a.routed - b.routed;
  d.hit = a.hit - b.hit;
  d.read = a.read - b.read;
  d.dropped = a.dropped - b.dropped;
  d.dropped_top_p = a.dropped_top_p - b.dropped_top_p;
  d.dropped_budget = a.dropped_budget - b.dropped_budget;
  d.dropped_cold = a.dropped_cold - b.dropped_cold;
  d.dropped_bytes = a.dropped_bytes - b.dropped_bytes;
  return d;
}

model::PrefetchCounters minus(const model::PrefetchCounters& a, const model::PrefetchCounters& b) {
  model::PrefetchCounters d;
  d.layers = a.layers - b.layers;
  d.experts = a.experts - b.experts;
  d.used = a.used - b.used;
  d.wasted = a.wasted - b.wasted;
  d.needed = a.needed - b.needed;
  d.failed = a.failed - b.failed;
  d.read_ahead = a.read_ahead - b.read_ahead;
  d.wasted_bytes = a.wasted_bytes - b.wasted_bytes;
  return d;
}

void accumulate(model::PrefetchCounters& into, const model::PrefetchCounters& c) {
  into.layers += c.layers;
  into.experts += c.experts;
  into.used += c.used;
  into.wasted += c.wasted;
  into.needed += c.needed;
  into.failed += c.failed;
  into.read_ahead += c.read_ahead;
  into.wasted_bytes += c.wasted_bytes;
}

void accumulate(model::ExpertCounters& into, const model::ExpertCounters& c) {
  into.routed += c.routed;
  into.hit += c.hit;
  into.read += c.read;
  into.dropped += c.dropped;
  into.dropped_top_p += c.dropped_top_p;
  into.dropped_budget += c.dropped_budget;
  into.dropped_cold += c.dropped_cold;
  into.dropped_bytes += c.dropped_bytes;
}

// Rounds for the summary: 4 decimals is below every quantity's noise and
// keeps the `# summary` line readable (JSON prints the shortest round-trip form).
double r4(double x) { return std::isfinite(x) ? round_to(x, 4) : 0.0; }

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace

const char* eval_kind_name(EvalKind k) {
  switch (k) {
    case EvalKind::Prefill: return "prefill";
    case EvalKind::Decode: return "decode";
    case EvalKind::Verify: return "verify";
    case EvalKind::Draft: return "draft";
  }
  return "?";
}

uint64_t major_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_majflt);
}

// ---- TokenRecorder ----

void TokenRecorder::begin(const model::Model& m) {
  before_.stats = m.stats();
  before_.majflt = major_faults();
  before_.t = std::chrono::steady_clock::now();
}

const TokenRecord& TokenRecorder::end(const model::Model& m, EvalKind kind, int n_tokens, int pos, int emitted) {
  const auto t = std::chrono::steady_clock::now();
  const uint64_t majflt = major_faults();
  const model::ModelStats s = m.stats();
  TokenRecord r;
  r.index = static_cast<int>(records_.size());
  r.kind = kind;
  r.n_tokens = n_tokens;
  r.emitted = emitted >= 0 ? emitted : (kind == EvalKind::Decode ? n_tokens : 0);
  r.pos = pos;
  r.ms = std::chrono::duration<double, std::milli>(t - before_.t).count();
  r.io_ms = (s.io.io_seconds - before_.stats.io.io_seconds) * 1e3;
  r.stall_ms = (s.time.expert_io_s - before_.stats.time.expert_io_s) * 1e3;
  r.compute_ms = std::max(0.0, r.ms - r.stall_ms);
  r.experts = minus(s.experts, before_.stats.experts);
  r.prefetch = minus(s.prefetch_counters, before_.stats.prefetch_counters);
  r.bytes_read = s.io.bytes_read - before_.stats.io.bytes_read;
  r.reads = s.io.reads - before_.stats.io.reads;
  r.majflt = majflt - before_.majflt;
  // Sampled after the eval (and outside its timing) since mincore over a
  // large dense set is not free.
  if (cfg_.dense_res_every > 0 && r.index % cfg_.dense_res_every == 0) {
    last_dense_res_ = m.dense_resident_fraction();
    r.dense_res_sampled = true;
  }
  r.dense_res = last_dense_res_;
  records_.push_back(r);
  if (on_record_) on_record_(records_.back());
  return records_.back();
}

// ---- summary ----

double RunSummary::cache_hit_pct() const {
  const uint64_t fetched = experts.hit + experts.read;
  return fetched ? 100.0 * static_cast<double>(experts.hit) / static_cast<double>(fetched) : 0.0;
}

double RunSummary::read_gbps() const {
  return time.eval_s > 0 ? static_cast<double>(bytes_read) / 1e9 / time.eval_s : 0.0;
}

double RunSummary::prefetch_wasted_mib_per_tok() const {
  const int n = prefill_tokens + decode_tokens;
  return n > 0 ? static_cast<double>(prefetch_counters.wasted_bytes) / kMiB / n : 0.0;
}

double RunSummary::decode_mib_per_tok() const {
  return decode_tokens > 0 ? static_cast<double>(decode_bytes_read) / kMiB / decode_tokens : 0.0;
}

double RunSummary::decode_experts_per_tok() const {
  return decode_tokens > 0 ? static_cast<double>(decode_experts_read) / decode_tokens : 0.0;
}

double RunSummary::tokens_per_forward() const {
  return decode_forwards > 0 ? static_cast<double>(decode_tokens) / static_cast<double>(decode_forwards) : 0.0;
}

double RunSummary::majflt_per_tok() const {
  const int n = prefill_tokens + decode_tokens;
  return n > 0 ? static_cast<double>(majflt) / n : 0.0;
}

RunSummary summarize(const SummaryInput& in) {
  RunSummary s;
  for (const TokenRecord& r : in.records) {
    if (r.kind == EvalKind::Prefill) {
      s.prefill_tokens += r.n_tokens;
      s.prefill_s += r.ms / 1e3;
    } else {
      s.decode_tokens += r.kind == EvalKind::Decode ? r.n_tokens : r.emitted;
      s.decode_s += r.ms / 1e3;
      s.decode_bytes_read += r.bytes_read;
      s.decode_experts_read += r.experts.read;
      if (r.kind != EvalKind::Draft) ++s.decode_forwards;
    }
    s.majflt += r.majflt;
    accumulate(s.experts, r.experts);
    accumulate(s.prefetch_counters, r.prefetch);
    s.bytes_read += r.bytes_read;
    s.reads += r.reads;
    s.io_lane_s += r.io_ms / 1e3;
  }
  s.ttft_ms = in.ttft_ms > 0 ? in.ttft_ms : (in.records.empty() ? 0.0 : in.records.front().ms);
  s.token_demand_bytes = moe::token_demand_bytes(in.moe_layers);
  s.layer_demand_bytes = moe::cache_floor_bytes(in.moe_layers, 1);  // one token's widest layer
  // The budget the store really uses (fixed or sized by --cache-mb auto), unless the caller overrides it.
  s.cache_budget_bytes = in.opts.cache_budget_bytes ? in.opts.cache_budget_bytes : in.stats.io.cache_budget_bytes;
  s.expert_budget = in.opts.expert_budget ? in.opts.expert_budget : in.stats.expert_budget;
  s.dense_resident_frac = in.dense_resident_frac;
  s.dense_bytes = in.stats.dense_bytes;
  s.resident_layout = in.stats.resident_layout;
  s.dense_packed_bytes = in.stats.dense_packed_bytes;
  s.experts_packed = in.stats.experts_packed;
  s.experts_transformed = in.stats.io.experts_transformed;
  s.peak_rss_mib = in.peak_rss_mib;
  s.time = in.stats.time;
  s.prefetch = in.stats.prefetch;
  s.mtp = in.mtp;
  s.recomputed_tokens = in.recomputed_tokens;
  s.route_replay = in.stats.route_replay;
  return s;
}

namespace {

// The summary as ordered (key, value) pairs: the one source of both the JSON
// object and the `# summary` line, so they cannot drift apart.
std::vector<std::pair<std::string, nlohmann::ordered_json>> summary_fields(const RunSummary& s) {
  std::vector<std::pair<std::string, nlohmann::ordered_json>> f;
  f.emplace_back("prefill_tokens", s.prefill_tokens);
  f.emplace_back("prefill_s", r4(s.prefill_s));
  f.emplace_back("prefill_tps", r4(s.prefill_tps()));
  f.emplace_back("decode_tokens", s.decode_tokens);
  f.emplace_back("decode_s", r4(s.decode_s));
  f.emplace_back("decode_tps", r4(s.decode_tps()));
  f.emplace_back("ttft_ms", r4(s.ttft_ms));
  f.emplace_back("token_demand_MiB", r4(static_cast<double>(s.token_demand_bytes) / kMiB));
  f.emplace_back("layer_demand_MiB", r4(static_cast<double>(s.layer_demand_bytes) / kMiB));
  f.emplace_back("cache_budget_MiB", r4(static_cast<double>(s.cache_budget_bytes) / kMiB));
  f.emplace_back("cache_hit_pct", r4(s.cache_hit_pct()));
  f.emplace_back("experts_routed", s.experts.routed);
  f.emplace_back("experts_hit", s.experts.hit);
  f.emplace_back("experts_read", s.experts.read);
  f.emplace_back("experts_dropped", s.experts.dropped);
  f.emplace_back("dropped_top_p", s.experts.dropped_top_p);
  f.emplace_back("dropped_budget", s.experts.dropped_budget);
  f.emplace_back("dropped_cold", s.experts.dropped_cold);
  f.emplace_back("io_saved_GB", r4(s.io_saved_gb()));
  f.emplace_back("expert_budget", s.expert_budget);
  f.emplace_back("bytes_read", s.bytes_read);
  f.emplace_back("reads", s.reads);
  f.emplace_back("read_GBps", r4(s.read_gbps()));
  f.emplace_back("io_lane_s", r4(s.io_lane_s));
  f.emplace_back("majflt", s.majflt);
  f.emplace_back("majflt_per_tok", r4(s.majflt_per_tok()));
  f.emplace_back("dense_resident_frac", r4(s.dense_resident_frac));
  f.emplace_back("dense_MiB", r4(static_cast<double>(s.dense_bytes) / kMiB));
  f.emplace_back("peak_rss_MiB", r4(s.peak_rss_mib));
  f.emplace_back("eval_s", r4(s.time.eval_s));
  f.emplace_back("expert_io_s", r4(s.time.expert_io_s));
  f.emplace_back("expert_matmul_s", r4(s.time.expert_matmul_s));
  f.emplace_back("attention_s", r4(s.time.attention_s));
  f.emplace_back("other_s", r4(s.time.other_s()));
  const model::PrefetchCounters& p = s.prefetch_counters;
  f.emplace_back("prefetch", s.prefetch);
  f.emplace_back("prefetch_experts", p.experts);
  f.emplace_back("prefetch_used", p.used);
  f.emplace_back("prefetch_wasted", p.wasted);
  f.emplace_back("prefetch_needed", p.needed);
  f.emplace_back("prefetch_failed", p.failed);
  f.emplace_back("prefetch_read_ahead", p.read_ahead);
  f.emplace_back("prefetch_precision_pct", r4(100.0 * p.precision()));
  f.emplace_back("prefetch_coverage_pct", r4(100.0 * p.coverage()));
  f.emplace_back("prefetch_wasted_MiB", r4(static_cast<double>(p.wasted_bytes) / kMiB));
  f.emplace_back("prefetch_wasted_MiB_per_tok", r4(s.prefetch_wasted_mib_per_tok()));
  f.emplace_back("decode_MiB_per_tok", r4(s.decode_mib_per_tok()));
  f.emplace_back("decode_experts_read_per_tok", r4(s.decode_experts_per_tok()));
  f.emplace_back("decode_tokens_per_forward", r4(s.tokens_per_forward()));
  const MtpCounters& m = s.mtp;
  f.emplace_back("mtp", m.depth);
  f.emplace_back("ngram", m.ngram);
  f.emplace_back("mtp_steps", m.steps);
  f.emplace_back("mtp_drafted", m.drafted);
  f.emplace_back("mtp_accepted", m.accepted);
  f.emplace_back("mtp_accept_pct", r4(m.accept_pct()));
  std::string per;
  for (size_t i = 0; i < m.drafted_at.size(); ++i)
    per += (i ? "/" : "") + fmt("%.1f", m.drafted_at[i] ? 100.0 * m.accepted_at[i] / m.drafted_at[i] : 0.0);
  f.emplace_back("mtp_accept_pct_by_pos", per);
  f.emplace_back("mtp_plain_steps", m.plain_steps);
  f.emplace_back("mtp_switches", m.switches);
  f.emplace_back("route_replay", !s.route_replay.empty());
  f.emplace_back("resident_layout", model::resident_layout_name(s.resident_layout));
  f.emplace_back("dense_packed_MiB", r4(static_cast<double>(s.dense_packed_bytes) / kMiB));
  f.emplace_back("experts_packed", s.experts_packed);
  f.emplace_back("experts_transformed", s.experts_transformed);
  f.emplace_back("recomputed_tokens", s.recomputed_tokens);
  return f;
}

}  // namespace

nlohmann::ordered_json summary_json(const RunSummary& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (auto& [key, value] : summary_fields(s)) j[key] = std::move(value);
  return j;
}

std::string expert_budget_line(const RunSummary& s) {
  if (s.expert_budget <= 0) return "";
  return "EXPERT_BUDGET=" + std::to_string(s.expert_budget) + " (dropped " + std::to_string(s.experts.dropped_budget) +
         " experts, ~" + fmt("%.2f", s.io_saved_gb()) + " GB I/O saved)";
}

std::string summary_human(const RunSummary& s) {
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "sluice: prefill %d tokens in %.3f s (%.1f tok/s), ttft %.1f ms; decode %d tokens in %.3f s "
                "(%.2f tok/s)\n",
                s.prefill_tokens, s.prefill_s, s.prefill_tps(), s.ttft_ms, s.decode_tokens, s.decode_s, s.decode_tps());
  out += buf;
  std::snprintf(buf, sizeof buf,
                "sluice: experts routed %" PRIu64 " = hit %" PRIu64 " + read %" PRIu64 " + dropped %" PRIu64
                " (cache %s, hit %.1f%%); read %.1f MiB in %" PRIu64 " reads, %.3f GB/s\n",
                s.experts.routed, s.experts.hit, s.experts.read, s.experts.dropped,
                s.cache_budget_bytes ? fmt("%.0f MiB", static_cast<double>(s.cache_budget_bytes) / kMiB).c_str() : "off",
                s.cache_hit_pct(), static_cast<double>(s.bytes_read) / kMiB, s.reads, s.read_gbps());
  out += buf;
  std::snprintf(buf, sizeof buf,
                "sluice: expert demand %.2f MiB/token, %.2f MiB/layer; dense %.1f MiB, %.0f%% resident; "
                "majflt/token %.2f; peak RSS %.1f MiB\n",
                static_cast<double>(s.token_demand_bytes) / kMiB, static_cast<double>(s.layer_demand_bytes) / kMiB,
                static_cast<double>(s.dense_bytes) / kMiB, 100.0 * s.dense_resident_frac, s.majflt_per_tok(),
                s.peak_rss_mib);
  out += buf;
  std::snprintf(buf, sizeof buf, "sluice: resident layout %s: dense %.1f MiB packed; experts %s (%llu re-laid)\n",
                model::resident_layout_name(s.resident_layout), static_cast<double>(s.dense_packed_bytes) / kMiB,
                s.experts_packed ? "packed as they become resident (cache entry, --load-all)"
                : s.experts_transformed > 0
                    ? "streamed: packed by the read lane where a prompt batch uses them several times"
                    : "plain",
                static_cast<unsigned long long>(s.experts_transformed));
  out += buf;
  std::snprintf(buf, sizeof buf,
                "sluice: time %.3f s = expert I/O wait %.3f + expert matmul %.3f + attention %.3f + other %.3f\n",
                s.time.eval_s, s.time.expert_io_s, s.time.expert_matmul_s, s.time.attention_s, s.time.other_s());
  out += buf;
  if (s.prefetch > 0 || s.prefetch_counters.layers > 0) {
    // --prefetch=prefill prefetches prompt micro-batches only: "(prefill)".
    const model::PrefetchCounters& p = s.prefetch_counters;
    const std::string depth = s.prefetch > 0 ? "depth " + std::to_string(s.prefetch) : "prefill";
    std::snprintf(buf, sizeof buf,
                  "sluice: prefetch (%s): %" PRIu64 " experts predicted, %" PRIu64
                  " used (%.1f%% precise, %.1f%% of %" PRIu64 " needed; %" PRIu64 " read ahead), %" PRIu64
                  " wasted (%.1f MiB, %.2f MiB/token), %" PRIu64 " failed reads re-read\n",
                  depth.c_str(), p.experts, p.used, 100.0 * p.precision(), 100.0 * p.coverage(), p.needed,
                  p.read_ahead, p.wasted,
                  static_cast<double>(p.wasted_bytes) / kMiB, s.prefetch_wasted_mib_per_tok(), p.failed);
    out += buf;
  }
  if (s.mtp.depth > 0) {
    const MtpCounters& m = s.mtp;
    std::string per;
    for (size_t i = 0; i < m.drafted_at.size(); ++i)
      per += fmt(i ? ", %.0f%%" : "%.0f%%", m.drafted_at[i] ? 100.0 * m.accepted_at[i] / m.drafted_at[i] : 0.0);
    const std::string source = m.ngram > 0 ? "ngram " + std::to_string(m.ngram) : std::string("mtp");
    std::snprintf(buf, sizeof buf,
                  "sluice: %s (up to %d drafts): %" PRIu64 " drafted, %" PRIu64
                  " accepted (%.1f%%; by position %s); %.2f tokens per trunk forward; %" PRIu64
                  " plain steps, %" PRIu64 " auto switches\n",
                  source.c_str(), m.depth, m.drafted, m.accepted, m.accept_pct(), per.c_str(), s.tokens_per_forward(),
                  m.plain_steps,
                  m.switches);
    out += buf;
  }
  if (!s.route_replay.empty()) out += "sluice: " + s.route_replay + " (benchmark mode)\n";
  if (s.recomputed_tokens > 0)
    out += "sluice: " + std::to_string(s.recomputed_tokens) +
           " tokens re-evaluated after rollbacks that fell back to a checkpoint (recurrent state)\n";
  if (s.decode_tokens > 0) {
    std::snprintf(buf, sizeof buf, "sluice: decode cost per emitted token: %.2f MiB read, %.2f expert loads\n",
                  s.decode_mib_per_tok(), s.decode_experts_per_tok());
    out += buf;
  }
  return out;
}

// ---- per-token text ----

std::string progress_line(const TokenRecord& r) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "tok %d n %d ms %.1f io %.1f compute %.1f stall %.1f routed %" PRIu64 " hit %" PRIu64 " read %" PRIu64
                " dropped %" PRIu64 " MiB %.1f majflt %" PRIu64 " dense_res %.2f",
                r.index, r.n_tokens, r.ms, r.io_ms, r.compute_ms, r.stall_ms, r.experts.routed, r.experts.hit,
                r.experts.read, r.experts.dropped, r.mib_read(), r.majflt, r.dense_res);
  return buf;
}

std::string csv_header() {
  return "index,kind,n_tokens,pos,ms,io_ms,compute_ms,stall_ms,routed,hit,read,dropped,bytes_read,reads,mib_read,"
         "majflt,dense_res";
}

std::string csv_row(const TokenRecord& r) {
  // Every field but the kind is a number; the kind goes through csv_field like
  // every text field of a CSV row here.
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%d,%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%.3f,%" PRIu64 ",%.4f",
                r.index, csv_field(eval_kind_name(r.kind)).c_str(), r.n_tokens, r.pos, r.ms, r.io_ms, r.compute_ms,
                r.stall_ms, r.experts.routed, r.experts.hit, r.experts.read, r.experts.dropped, r.bytes_read, r.reads,
                r.mib_read(), r.majflt, r.dense_res);
  return buf;
}

CsvWriter::CsvWriter(const std::string& path, io::OutputOptions opts) : out_(path, std::move(opts)) {
  out_.write(csv_header() + "\n");
}

void CsvWriter::write(const TokenRecord& r) { out_.write(csv_row(r) + "\n"); }

void CsvWriter::close() {
  if (closed_) return;
  closed_ = true;
  out_.commit();
}

}  // namespace sluice::telemetry
