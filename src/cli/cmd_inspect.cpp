// STUB — replaced by the real 'inspect' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_inspect(CLI::App& app) { app.add_subcommand("inspect", "(not implemented yet)"); }
}  // namespace sluice::cli
