#include "cli/telemetry_output.h"

#include <cstdio>

#include "cli/stdout_output.h"

#include "util/error.h"

namespace sluice::cli {

TelemetryOutput::TelemetryOutput(const TelemetryFlags& flags, runtime::Session& session,
                                 const std::vector<std::string>& inputs)
    : session_(session) {
  if (flags.dense_res_every < -1)
    throw Error("--dense-res-every: must be >= 0 (got " + std::to_string(flags.dense_res_every) + ")");
  if (!flags.csv_path.empty()) {
    io::OutputOptions out{.flag = "--csv", .inputs = session.gguf().paths(), .overwrite = true};
    out.inputs.insert(out.inputs.end(), inputs.begin(), inputs.end());
    csv_ = std::make_unique<runtime::CsvWriter>(flags.csv_path, std::move(out));
  }
  runtime::TelemetryConfig cfg;
  cfg.dense_res_every = flags.dense_res_every >= 0 ? flags.dense_res_every : (flags.progress ? 1 : 16);
  session_.telemetry().set_config(cfg);
  const bool progress = flags.progress;
  runtime::CsvWriter* csv = csv_.get();
  session_.telemetry().set_on_record([progress, csv](const runtime::TokenRecord& r) {
    if (progress) std::fprintf(stderr, "%s\n", runtime::progress_line(r).c_str());
    if (csv) csv->write(r);
  });
}

// The callback points at csv_: detach it before the writer goes.
TelemetryOutput::~TelemetryOutput() { session_.telemetry().set_on_record({}); }

void TelemetryOutput::finish(const runtime::SummaryOptions& opts) {
  if (csv_) csv_->close();
  flush_stdout();
  runtime::print_summary(session_.summary(opts), stderr);
}

}  // namespace sluice::cli
