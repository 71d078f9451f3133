// `sluice logits`: evaluate a token-id sequence as one batch and write the
// logits of every position as raw float32, row-major [n_tokens][n_vocab], no
// header (the layout of shared/golden/*.logits.f32). The file is written
// through io::OutputFile, so it exists only when complete.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/id_list.h"
#include "cli/engine_flags.h"
#include "cli/notice.h"
#include "cli/telemetry_output.h"
#include "io/output_file.h"
#include "runtime/mtp_trace.h"
#include "runtime/session.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct LogitsOptions {
  runtime::EngineOptions engine;
  std::string tokens;
  std::string out_path;
  std::string mtp_out;        // --mtp-out: the NextN head's draft logits [n-1][n_vocab]
  std::string mtp_chain_out;  // --mtp-chain-out: chained drafts [n-1][K][n_vocab]
  int mtp_chain_k = 3;        // --mtp-chain-k
  TelemetryFlags telemetry;
};

// Writes floats to PATH through io::OutputFile (refusing the model's files).
void write_floats(const std::string& path, const char* flag, const std::vector<std::string>& inputs,
                  const std::vector<float>& v) {
  io::OutputFile out(path, {.flag = flag, .inputs = inputs, .overwrite = true});
  out.write(v.data(), v.size() * sizeof(float));
  out.commit();
}

void run_logits(const LogitsOptions& o) {
  const std::vector<int32_t> ids = parse_id_list(o.tokens, "--tokens");
  const bool mtp = !o.mtp_out.empty() || !o.mtp_chain_out.empty();
  model::ModelConfig cfg = o.engine.to_model_config();
  cfg.mtp = mtp;  // load the NextN head (Error when the file has none)
  runtime::Session session = runtime::Session::open(o.engine.model_path, cfg);
  // Refused before the evaluation when -o is one of the model's files. The
  // file appears only when complete (no header, so a partial one must never
  // be mistaken for a shorter result).
  io::OutputFile out(o.out_path, {.flag = "-o", .inputs = session.gguf().paths(), .overwrite = true});
  const size_t n_vocab = static_cast<size_t>(session.n_vocab());
  std::vector<float> logits(ids.size() * n_vocab);
  TelemetryOutput telemetry(o.telemetry, session);
  if (mtp) {
    // The trunk logits of the same pass (bit-identical to a run without the head).
    const runtime::MtpTrace t =
        runtime::mtp_trace(session.model(), ids, o.mtp_chain_out.empty() ? 0 : o.mtp_chain_k);
    logits = t.trunk_logits;
    if (!o.mtp_out.empty()) write_floats(o.mtp_out, "--mtp-out", session.gguf().paths(), t.draft_logits);
    if (!o.mtp_chain_out.empty()) write_floats(o.mtp_chain_out, "--mtp-chain-out", session.gguf().paths(), t.chain);
  } else {
    session.eval_all(ids, logits.data());
  }

  out.write(logits.data(), logits.size() * sizeof(float));
  out.commit();
  if (cfg.route_trace) cfg.route_trace->close();
  notice("wrote " + std::to_string(ids.size()) + " x " + std::to_string(n_vocab) + " logits to " + o.out_path);
  telemetry.finish();
}

}  // namespace

void register_logits(CLI::App& app) {
  auto opts = std::make_shared<LogitsOptions>();
  CLI::App* cmd = app.add_subcommand("logits", "evaluate token ids and write raw float32 logits [n_tokens][n_vocab]");
  add_engine_flags(cmd, opts->engine);
  cmd->add_option("--tokens", opts->tokens, "token ids, comma separated (e.g. 1,17,42)")->required();
  cmd->add_option("-o,--output", opts->out_path, "output file")->required();
  cmd->add_option("--mtp-out", opts->mtp_out,
                  "also run the NextN/MTP head: its draft logits [n_tokens-1][n_vocab] (row i: the row at position "
                  "i+1, predicting token i+2) to FILE");
  cmd->add_option("--mtp-chain-out", opts->mtp_chain_out,
                  "chained drafts [n_tokens-1][K][n_vocab]: per anchor m, K head steps fed their own argmax")
      ->capture_default_str();
  cmd->add_option("--mtp-chain-k", opts->mtp_chain_k, "steps per chain (--mtp-chain-out)")->capture_default_str();
  add_telemetry_flags(cmd, opts->telemetry);
  cmd->callback([opts] { run_logits(*opts); });
}

}  // namespace sluice::cli
