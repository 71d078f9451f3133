// STUB — replaced by the real 'tokenize' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_tokenize(CLI::App& app) { app.add_subcommand("tokenize", "(not implemented yet)"); }
}  // namespace sluice::cli
