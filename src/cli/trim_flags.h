// Routing-trim flags (see moe/trims.h), for any subcommand that runs a model.
//
// Spelling: the product brief calls the routing trims --top-k / --top-p, but
// `sluice run` also takes llama.cpp's SAMPLING --top-k / --top-p, and users
// coming from llama.cpp expect those to mean sampling. So the routing ones are
// --moe-top-k / --moe-top-p; the other trims keep their brief spelling.
//
// Use: call add_trim_flags before parsing; in the subcommand callback call
// finalize_trim_flags once (it applies the SLUICE_TOPK / SLUICE_TOPP /
// SLUICE_EXPERT_BUDGET environment fallbacks, or their bare names TOPK / TOPP /
// EXPERT_BUDGET, for flags not given, then validates; errors are
// sluice::Error naming the flag or variable). The binding is inline so that
// the unit tests, which do not link the CLI, exercise the same code.
#pragma once

#include <CLI/CLI.hpp>

#include "moe/trim_config.h"

namespace sluice::cli {

// The registered options, to tell after parsing which flags were given.
struct TrimFlags {
  CLI::Option* top_k = nullptr;
  CLI::Option* top_p = nullptr;
  CLI::Option* expert_budget = nullptr;
  CLI::Option* drop_cold = nullptr;
  CLI::Option* drop_no_renorm = nullptr;

  moe::TrimFlagsGiven given() const {
    return {top_k->count() > 0, top_p->count() > 0, expert_budget->count() > 0};
  }
};

// cfg must outlive parsing. cfg.normalize is the model's, not a flag: it is left alone.
inline TrimFlags add_trim_flags(CLI::App* cmd, moe::TrimConfig& cfg) {
  const char* group = "MoE routing trims (trade quality for expert I/O; all off by default)";
  TrimFlags f;
  f.top_k = cmd->add_option(moe::kFlagTopK, cfg.top_k,
                            "experts per token instead of the model's value (env SLUICE_TOPK)")
                ->group(group);
  f.top_p = cmd->add_option(moe::kFlagTopP, cfg.top_p,
                            "per token, keep the fewest top experts whose gate mass reaches P, in (0,1] (env SLUICE_TOPP)")
                ->group(group);
  f.expert_budget = cmd->add_option(moe::kFlagExpertBudget, cfg.expert_budget,
                                    "max distinct experts per layer per batch, by summed gate weight (env SLUICE_EXPERT_BUDGET)")
                        ->group(group);
  f.drop_cold = cmd->add_option(moe::kFlagDropCold, cfg.drop_cold,
                                "skip a non-resident expert whose renormalised weight is below W (never a token's top-1)")
                    ->group(group);
  f.drop_no_renorm = cmd->add_flag_callback(
                            moe::kFlagDropNoRenorm, [&cfg] { cfg.drop_renorm = false; },
                            "after --drop-cold-experts, leave the remaining weights as they are")
                         ->group(group);
  return f;
}

// The environment setting for a moe::kEnv* key: the SLUICE_ name, else the
// bare name (TOPK...); empty values count as unset. Prints one notice line
// naming the variable and its value when one is found (it is only asked for
// flags not given, so a found one is in force).
std::optional<moe::EnvSetting> read_trim_env(const char* key);

// Reads the environment (once) and validates; see moe::resolve_trim_config.
void finalize_trim_flags(const TrimFlags& flags, moe::TrimConfig& cfg);

}  // namespace sluice::cli
