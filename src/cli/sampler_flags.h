// The sampling flags shared by `run` and `chat` (--temp, --top-k, --top-p,
// --min-p, --repeat-penalty, --repeat-last-n, -s), their ranges, and the
// seed rule: -1 (the default) draws a random seed and prints it when it can
// matter, so any run can be repeated.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "runtime/sampler.h"

namespace sluice::cli {

struct SamplerFlags {
  runtime::SamplerConfig cfg;
  int64_t seed = -1;  // -s; -1: random, printed
};

void add_sampler_flags(CLI::App* cmd, SamplerFlags& f);

// Checks the ranges (Error naming the flag); -s may be -1.
void check_sampler(const SamplerFlags& f);

// check_sampler, then the seed resolved (-1: drawn now, printed when sampling).
runtime::SamplerConfig resolve_sampler(const SamplerFlags& f);

}  // namespace sluice::cli
