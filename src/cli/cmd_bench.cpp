// STUB — replaced by the real 'bench' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_bench(CLI::App& app) { app.add_subcommand("bench", "(not implemented yet)"); }
}  // namespace sluice::cli
