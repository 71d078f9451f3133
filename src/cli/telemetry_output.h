// Telemetry flags shared by the model-running subcommands (run, logits, and
// later eval/bench) and the printing they drive. The numbers come from
// runtime (Session::telemetry(), Session::summary()); this file only wires
// flags to output streams. Everything goes to stderr (stdout is the
// generated text) except the --csv file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/session.h"

namespace sluice::cli {

struct TelemetryFlags {
  bool progress = false;  // --progress: one line per eval on stderr
  std::string csv_path;   // --csv FILE: per-eval rows
  // --dense-res-every N: mincore sampling period in records; -1 = auto: every
  // record with --progress, else every 16th (mincore costs ~0.5-1 ms per GiB
  // of dense weights, small next to a streamed token but not free).
  int dense_res_every = -1;
};

inline void add_telemetry_flags(CLI::App* cmd, TelemetryFlags& f) {
  cmd->add_flag("--progress", f.progress, "print one telemetry line per token on stderr");
  cmd->add_option("--csv", f.csv_path, "write per-token telemetry rows to FILE (CSV with header)");
  cmd->add_option("--dense-res-every", f.dense_res_every,
                  "sample dense-weight residency (mincore) every N tokens; 0 = only at the end; "
                  "default: every token with --progress, else every 16th");
}

// Installs --progress/--csv output on a session's recorder; finish() closes
// the CSV and prints the summary. Keep it alive for the session's evals.
class TelemetryOutput {
 public:
  // The --csv file refuses to be any of the session's model files or `inputs`.
  TelemetryOutput(const TelemetryFlags& flags, runtime::Session& session, const std::vector<std::string>& inputs = {});
  TelemetryOutput(const TelemetryOutput&) = delete;
  TelemetryOutput& operator=(const TelemetryOutput&) = delete;
  ~TelemetryOutput();

  // Closes the CSV (it appears only then; throws Error on a write failure),
  // flushes stdout (checked) and prints the summary
  // (human block, EXPERT_BUDGET when set, `# summary`, SLUICE_DONE) to stderr.
  void finish(const runtime::SummaryOptions& opts = {});

 private:
  runtime::Session& session_;
  std::unique_ptr<runtime::CsvWriter> csv_;
};

}  // namespace sluice::cli
