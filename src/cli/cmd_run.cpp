// `sluice run`: tokenize a prompt, generate, stream the text to stdout; the
// telemetry summary (cli/telemetry_output.h) goes to stderr.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/telemetry_output.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct RunOptions {
  runtime::EngineOptions engine;
  runtime::SamplerConfig sampler;
  std::string prompt;
  int n_predict = 128;
  bool ignore_eos = false;
  TelemetryFlags telemetry;
};

void run_generate(const RunOptions& o) {
  if (o.n_predict < 0) throw Error("-n: must be >= 0 (got " + std::to_string(o.n_predict) + ")");
  runtime::Session session = runtime::Session::open(o.engine.model_path, o.engine.to_model_config());
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(session.gguf().metadata());
  const std::vector<int32_t> prompt = tok.encode(o.prompt, true, false);
  if (prompt.empty()) throw Error("-p: the prompt tokenizes to nothing (and the model adds no BOS)");
  TelemetryOutput telemetry(o.telemetry, session);

  std::fwrite(o.prompt.data(), 1, o.prompt.size(), stdout);
  std::fflush(stdout);
  std::vector<int32_t> stop;
  if (!o.ignore_eos) {
    for (int32_t id : {tok.eos(), tok.eot()})
      if (id >= 0) stop.push_back(id);
  }
  runtime::Sampler sampler(o.sampler);
  session.generate(prompt, o.n_predict, sampler,
      [&](int32_t id) {
        const std::string piece = tok.token_to_piece(id, false);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      },
      stop);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  telemetry.finish();
}

}  // namespace

void register_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  add_engine_flags(cmd, opts->engine);
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text")->required();
  cmd->add_option("-n,--n-predict", opts->n_predict, "tokens to generate")->capture_default_str();
  cmd->add_option("--temp", opts->sampler.temperature, "temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", opts->sampler.top_k, "top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", opts->sampler.top_p, "top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", opts->sampler.min_p, "min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", opts->sampler.repeat_penalty, "repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", opts->sampler.repeat_last_n, "tokens the penalty looks back over")
      ->capture_default_str();
  cmd->add_option("--seed", opts->sampler.seed, "sampling seed")->capture_default_str();
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "keep generating after end-of-sequence");
  add_telemetry_flags(cmd, opts->telemetry);
  cmd->callback([opts] { run_generate(*opts); });
}

}  // namespace sluice::cli
