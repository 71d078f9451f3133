#include "cli/sampler_flags.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "util/error.h"

namespace sluice::cli {

void add_sampler_flags(CLI::App* cmd, runtime::SamplerConfig& s) {
  cmd->add_option("--temp", s.temperature, "temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1 = off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back over")->capture_default_str();
  cmd->add_option("-s,--seed", s.seed, "sampling seed")->capture_default_str();
}

// Each of these, out of range, would print nothing or garbage with status 0
// (--repeat-penalty 0 divides by zero); NaN fails every comparison, hence the
// negated forms.
void check_sampler(const runtime::SamplerConfig& s) {
  auto require = [](bool ok, const char* flag, float v, const char* range) {
    if (ok) return;
    char got[32];
    std::snprintf(got, sizeof got, "%g", static_cast<double>(v));
    throw Error(std::string(flag) + ": must be " + range + " (got " + got + ")");
  };
  require(std::isfinite(s.temperature) && s.temperature >= 0, "--temp", s.temperature, "a number >= 0 (0 = greedy)");
  require(s.top_p > 0 && s.top_p <= 1, "--top-p", s.top_p, "in (0, 1] (1 = off)");
  require(s.min_p >= 0 && s.min_p <= 1, "--min-p", s.min_p, "in [0, 1] (0 = off)");
  require(std::isfinite(s.repeat_penalty) && s.repeat_penalty > 0, "--repeat-penalty", s.repeat_penalty,
          "a number > 0 (1 = off)");
}

}  // namespace sluice::cli
