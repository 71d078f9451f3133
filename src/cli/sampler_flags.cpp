#include "cli/sampler_flags.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "cli/notice.h"
#include "util/error.h"

namespace sluice::cli {

void add_sampler_flags(CLI::App* cmd, SamplerFlags& f) {
  const char* g = "Sampling";
  cmd->add_option("--temp", f.cfg.temperature, "temperature (0 = greedy)")->capture_default_str()->group(g);
  cmd->add_option("--top-k", f.cfg.top_k, "top-k (0 = off)")->capture_default_str()->group(g);
  cmd->add_option("--top-p", f.cfg.top_p, "top-p (1 = off)")->capture_default_str()->group(g);
  cmd->add_option("--min-p", f.cfg.min_p, "min-p (0 = off)")->capture_default_str()->group(g);
  cmd->add_option("--repeat-penalty", f.cfg.repeat_penalty, "repetition penalty (1 = off)")->capture_default_str()->group(g);
  cmd->add_option("--repeat-last-n", f.cfg.repeat_last_n, "tokens the penalty looks back over")->capture_default_str()->group(g);
  cmd->add_option("-s,--seed", f.seed, "sampling seed (-1: random, printed)")->capture_default_str()->group(g);
}

// Each of these, out of range, would print nothing or garbage with status 0
// (--repeat-penalty 0 divides by zero); NaN fails every comparison, hence the
// negated forms.
void check_sampler(const SamplerFlags& f) {
  const runtime::SamplerConfig& s = f.cfg;
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
  if (f.seed < -1) throw Error("-s: seed must be >= 0, or -1 for a random one (got " + std::to_string(f.seed) + ")");
}

runtime::SamplerConfig resolve_sampler(const SamplerFlags& f) {
  check_sampler(f);
  runtime::SamplerConfig out = f.cfg;
  if (f.seed >= 0) {
    out.seed = static_cast<uint64_t>(f.seed);
  } else {
    std::random_device rd;
    out.seed = ((uint64_t{rd()} << 32) | rd()) >> 1;  // fits -s's int64 range
    if (out.temperature > 0) notice("sluice: seed " + std::to_string(out.seed));
  }
  return out;
}

}  // namespace sluice::cli
