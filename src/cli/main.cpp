// sluice — run Mixture-of-Experts models larger than RAM by streaming experts
// from flash. This file only wires subcommands and turns errors into one clear
// message and a non-zero exit.
#include <csignal>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "util/error.h"

int main(int argc, char** argv) {
  // A closed pipe becomes EPIPE on the write, which the writers turn into a
  // quiet stop (StdoutClosed) instead of a death that skips cleanup.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"sluice: run MoE models larger than RAM by streaming experts from flash"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sluice 0.1.0");
  sluice::cli::register_inspect(app);
  sluice::cli::register_synth(app);
  sluice::cli::register_run(app);
  sluice::cli::register_logits(app);
  sluice::cli::register_tokenize(app);
  sluice::cli::register_cache_sim(app);
  sluice::cli::register_bench(app);
  sluice::cli::register_eval(app);
  sluice::cli::register_repack(app);
  sluice::cli::register_serve(app);
  try {
    app.parse(argc, argv);
    sluice::cli::close_stdout();  // a failed final flush is a failed command
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sluice::StdoutClosed&) {
    return 141;  // what a shell reports for a process ended by SIGPIPE; no message
  } catch (const sluice::Error& e) {
    std::fprintf(stderr, "sluice: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
