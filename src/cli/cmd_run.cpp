// STUB — replaced by the real 'run' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_run(CLI::App& app) { app.add_subcommand("run", "(not implemented yet)"); }
}  // namespace sluice::cli
