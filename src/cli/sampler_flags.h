// The sampling flags `run` and `serve` share (--temp, --top-k, --top-p,
// --min-p, --repeat-penalty, --repeat-last-n, -s/--seed) and their range
// check. For `serve` they are the defaults a request's own fields override.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/sampler.h"

namespace sluice::cli {

// `s` must outlive parsing and the command's callback.
void add_sampler_flags(CLI::App* cmd, runtime::SamplerConfig& s);
// Error naming the flag when a value is out of range.
void check_sampler(const runtime::SamplerConfig& s);

}  // namespace sluice::cli
