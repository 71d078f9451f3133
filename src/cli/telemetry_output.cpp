#include "cli/telemetry_output.h"

#include <cstdio>

#include "cli/notice.h"
#include "cli/stdout_output.h"
#include "io/output_file.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::cli {

void add_telemetry_flags(CLI::App* cmd, TelemetryFlags& f, const std::string& json_what) {
  const char* group = "Output";
  CLI::Option* q = cmd->add_flag_callback(
                          "-q,--quiet",
                          [&f] {
                            f.verbosity = Verbosity::kQuiet;
                            set_quiet(true);
                          },
                          "nothing on stderr but errors (no summary, no notices)")
                       ->group(group);
  CLI::Option* v = cmd->add_flag_callback(
                          "-v,--verbose", [&f] { f.verbosity = Verbosity::kVerbose; },
                          "the full telemetry block on stderr instead of the one summary line")
                       ->group(group);
  q->excludes(v);
  cmd->add_option("--json", f.json_path,
                  "write one JSON object to FILE (- for stdout): " + (json_what.empty() ? "" : json_what + " and ") +
                      "the run summary")
      ->group(group);
  cmd->add_flag("--progress", f.progress, "print one telemetry line per token on stderr")->group(group);
  cmd->add_option("--csv", f.csv_path, "write per-token telemetry rows to FILE (CSV with header)")->group(group);
  cmd->add_option("--dense-res-every", f.dense_res_every,
                  "sample dense-weight residency (mincore) every N tokens; 0 = only at the end; "
                  "default: every token with --progress, else every 16th")
      ->group(group);
}

std::string summary_line(const telemetry::RunSummary& s) {
  char buf[320];
  int n = s.decode_tokens > 0
              ? std::snprintf(buf, sizeof buf, "sluice: decode %d tokens at %.2f tok/s (prompt %d at %.1f tok/s); %.1f MiB read/token",
                              s.decode_tokens, s.decode_tps(), s.prefill_tokens, s.prefill_tps(), s.decode_mib_per_tok())
              : std::snprintf(buf, sizeof buf, "sluice: prompt %d tokens at %.1f tok/s; %.1f MiB read", s.prefill_tokens,
                              s.prefill_tps(), static_cast<double>(s.bytes_read) / 1048576.0);
  std::string line(buf, static_cast<size_t>(n));
  if (s.cache_budget_bytes > 0) {
    std::snprintf(buf, sizeof buf, "; cache hit %.1f%%", s.cache_hit_pct());
    line += buf;
  }
  std::snprintf(buf, sizeof buf, "; peak RSS %.0f MiB", s.peak_rss_mib);
  return line + buf;
}

TelemetryOutput::TelemetryOutput(const TelemetryFlags& flags, runtime::Session& session,
                                 const std::vector<std::string>& inputs)
    : flags_(flags), session_(session) {
  if (flags.dense_res_every < -1)
    throw Error("--dense-res-every: must be >= 0 (got " + std::to_string(flags.dense_res_every) + ")");
  std::vector<std::string> refused = session.gguf().paths();
  refused.insert(refused.end(), inputs.begin(), inputs.end());
  if (!flags.csv_path.empty()) {
    csv_ = std::make_unique<telemetry::CsvWriter>(flags.csv_path,
                                                io::OutputOptions{.flag = "--csv", .inputs = refused, .overwrite = true});
  }
  if (!flags.json_path.empty() && !flags.json_to_stdout()) {
    json_ = std::make_unique<io::OutputFile>(flags.json_path,
                                             io::OutputOptions{.flag = "--json", .inputs = refused, .overwrite = true});
  }
  telemetry::TelemetryConfig cfg;
  cfg.dense_res_every = flags.dense_res_every >= 0 ? flags.dense_res_every : (flags.progress ? 1 : 16);
  session_.telemetry().set_config(cfg);
  const bool progress = flags.progress;
  telemetry::CsvWriter* csv = csv_.get();
  session_.telemetry().set_on_record([progress, csv](const telemetry::TokenRecord& r) {
    if (progress) std::fprintf(stderr, "%s\n", telemetry::progress_line(r).c_str());
    if (csv) csv->write(r);
  });
}

// The callback points at csv_: detach it before the writer goes.
TelemetryOutput::~TelemetryOutput() { session_.telemetry().set_on_record({}); }

void TelemetryOutput::finish(const telemetry::SummaryOptions& opts, nlohmann::ordered_json fields) {
  if (csv_) csv_->close();
  flush_stdout();
  const telemetry::RunSummary s = session_.summary(opts);
  if (flags_.verbosity == Verbosity::kVerbose) {
    std::string text = telemetry::summary_human(s);
    const std::string budget = telemetry::expert_budget_line(s);
    if (!budget.empty()) text += budget + "\n";
    std::fputs(text.c_str(), stderr);
  } else if (flags_.verbosity == Verbosity::kSummary) {
    std::fprintf(stderr, "%s\n", summary_line(s).c_str());
  }
  if (flags_.json_path.empty()) return;  // json_ is set unless the object goes to stdout
  fields["summary"] = telemetry::summary_json(s);
  const std::string doc = json_text(fields, 2) + "\n";
  if (flags_.json_to_stdout()) {
    out(doc);
    flush_stdout();
    return;
  }
  json_->write(doc);
  json_->commit();
}

}  // namespace sluice::cli
