// Each subcommand lives in its own cmd_*.cpp and registers itself on the app.
// The callback parses flags into a typed options struct and calls into the
// layers below; it is the only place that reads the environment.
#pragma once

#include <CLI/CLI.hpp>

namespace sluice::cli {

void register_inspect(CLI::App& app);
void register_synth(CLI::App& app);
void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_logits(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_cache_sim(CLI::App& app);
void register_route_predict(CLI::App& app);
void register_bench(CLI::App& app);
void register_eval(CLI::App& app);
void register_repack(CLI::App& app);
void register_serve(CLI::App& app);
void register_models(CLI::App& app);

}  // namespace sluice::cli
