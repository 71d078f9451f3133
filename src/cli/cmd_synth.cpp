// STUB — replaced by the real 'synth' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_synth(CLI::App& app) { app.add_subcommand("synth", "(not implemented yet)"); }
}  // namespace sluice::cli
