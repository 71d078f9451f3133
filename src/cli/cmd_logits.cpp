// STUB — replaced by the real 'logits' subcommand.
#include "cli/commands.h"
namespace sluice::cli {
void register_logits(CLI::App& app) { app.add_subcommand("logits", "(not implemented yet)"); }
}  // namespace sluice::cli
