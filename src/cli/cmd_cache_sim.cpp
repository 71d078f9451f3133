// STUB — replaced by the real 'cache-sim' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_cache_sim(CLI::App& app) { app.add_subcommand("cache-sim", "(not implemented yet)"); }
}  // namespace sluice::cli
