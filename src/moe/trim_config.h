// Settings of the routing trims (see moe/trims.h) and their validation.
//
// The trims trade quality for expert I/O; every one is off by default. This
// header only holds the values and checks them: reading flags and the
// environment is the CLI's job (cli/trim_flags.h), which hands the
// environment in through an EnvLookup so that this code never calls getenv.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace sluice::moe {

struct TrimConfig {
  int top_k = 0;            // experts per token; 0 = the model's own value
  float top_p = 1.0f;       // per-position gate-mass cut-off, (0, 1]; 1 = off
  int expert_budget = 0;    // max distinct experts per layer per ubatch; 0 = off
  float drop_cold = 0.0f;   // skip cache-missing experts below this renormalised weight; 0 = off
  bool drop_renorm = true;  // renormalise after drop_cold (when the model normalises)
  bool normalize = true;    // from the model: does it renormalise its top-k weights?

  // True when some trim after top-k selection can change a routing table.
  bool any_table_trim() const { return top_p < 1.0f || expert_budget > 0 || drop_cold > 0.0f; }
};

// Spellings used in error messages. The routing flags carry a `moe-` prefix
// because `sluice run` also takes llama.cpp's SAMPLING flags `--top-k` and
// `--top-p`. The environment keys are SLUICE_-prefixed; the CLI also reads
// the product brief's bare names (TOPK, TOPP, EXPERT_BUDGET) behind them.
inline constexpr const char* kFlagTopK = "--moe-top-k";
inline constexpr const char* kFlagTopP = "--moe-top-p";
inline constexpr const char* kFlagExpertBudget = "--expert-budget";
inline constexpr const char* kFlagDropCold = "--drop-cold-experts";
inline constexpr const char* kFlagDropNoRenorm = "--drop-no-renorm";
inline constexpr const char* kEnvTopK = "SLUICE_TOPK";
inline constexpr const char* kEnvTopP = "SLUICE_TOPP";
inline constexpr const char* kEnvExpertBudget = "SLUICE_EXPERT_BUDGET";

// Which of the flags that have an environment fallback were given explicitly.
struct TrimFlagsGiven {
  bool top_k = false;
  bool top_p = false;
  bool expert_budget = false;
};

// An environment variable in force: the name it was read under (the key or
// a fallback spelling, for messages) and its value.
struct EnvSetting {
  std::string name;
  std::string value;
};

// The setting for a key (kEnvTopK...), or nullopt when none is set.
using EnvLookup = std::function<std::optional<EnvSetting>(const char* key)>;

// Fills top_k / top_p / expert_budget from the kEnv* keys where the flag was
// not given (env is only asked then) and the variable is set to a non-empty
// value, then validates every field. Errors (sluice::Error) name the flag, or
// the environment variable and its value when that is where the value came from:
//   top-k >= 1, top-p in (0, 1], expert budget >= 1, drop-cold in [0, 1].
// Explicit values must be >= 1 for top-k and budget (the defaults 0 mean
// "model's value" / "off"); an empty variable counts as unset.
void resolve_trim_config(TrimConfig& cfg, const TrimFlagsGiven& given, const EnvLookup& env);

// Validates a config built in code (no environment); errors name the flags.
// Here top_k == 0 and expert_budget == 0 are accepted as "off".
void validate_trim_config(const TrimConfig& cfg);

// The number of experts to select per token: cfg.top_k, or the model's k when
// it is 0. Throws sluice::Error naming --moe-top-k when it exceeds n_expert.
int effective_top_k(const TrimConfig& cfg, int model_k, int n_expert);

}  // namespace sluice::moe
