// Output flags shared by the model-running subcommands (run, logits) and the
// reporting they drive. The numbers come from runtime (Session::telemetry(),
// Session::summary()); this file only wires flags to output streams.
//
// Discipline (README "Output"): stdout is the command's product (run: the
// text); stderr carries, by default, one short summary line; -q nothing but
// errors (notices are silenced too: cli/notice.h); -v the full human block.
// Machine output only where asked: --csv FILE per-token rows, --json FILE|-
// one JSON object at the end.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/session.h"

namespace sluice::io {
class OutputFile;
}

namespace sluice::cli {

enum class Verbosity {
  kQuiet,    // -q: nothing on stderr but errors
  kSummary,  // default: one summary line
  kVerbose,  // -v: the full telemetry block
};

struct TelemetryFlags {
  Verbosity verbosity = Verbosity::kSummary;
  bool progress = false;  // --progress: one line per eval on stderr
  std::string csv_path;   // --csv FILE: per-eval rows
  std::string json_path;  // --json FILE|-: the result object ("-": stdout)
  // --dense-res-every N: mincore sampling period in records; -1 = auto: every
  // record with --progress, else every 16th (mincore costs ~0.5-1 ms per GiB
  // of dense weights, small next to a streamed token but not free).
  int dense_res_every = -1;

  bool json_to_stdout() const { return json_path == "-"; }
};

// `json_what` says what the --json object holds besides the summary.
void add_telemetry_flags(CLI::App* cmd, TelemetryFlags& f, const std::string& json_what = "");

// One line: tokens, tok/s, MiB read per token, cache hit %, peak RSS.
std::string summary_line(const telemetry::RunSummary& s);

// Installs --progress/--csv output on a session's recorder; finish() closes
// the CSV and reports the summary. Keep it alive for the session's evals.
class TelemetryOutput {
 public:
  // The --csv and --json files refuse to be any of the session's model files or `inputs`.
  TelemetryOutput(const TelemetryFlags& flags, runtime::Session& session, const std::vector<std::string>& inputs = {});
  TelemetryOutput(const TelemetryOutput&) = delete;
  TelemetryOutput& operator=(const TelemetryOutput&) = delete;
  ~TelemetryOutput();

  // Closes the CSV (it appears only then; throws Error on a write failure),
  // flushes stdout (checked) and reports the summary as the flags ask: the
  // line or block on stderr, and with --json the object `fields` plus
  // "summary" (telemetry::summary_json) to the file or stdout.
  void finish(const telemetry::SummaryOptions& opts = {},
              nlohmann::ordered_json fields = nlohmann::ordered_json::object());

 private:
  TelemetryFlags flags_;
  runtime::Session& session_;
  std::unique_ptr<telemetry::CsvWriter> csv_;
  std::unique_ptr<io::OutputFile> json_;  // --json FILE, opened (and checked) before the run
};

}  // namespace sluice::cli
