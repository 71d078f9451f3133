// Expert-usage profiles: how often a model routed to each (layer, expert),
// saved by `sluice run --save-usage FILE` and read by
// `sluice cache-sim --cache-warm FILE` to start a simulated cache warm (filled
// with the most used experts) instead of empty.
//
// File (JSON, one object):
//   {"format":"sluice-expert-usage","version":1,"model":"NAME","n_layer":L,
//    "n_expert":E,"tokens":N,"counts":[[c_0 .. c_{E-1}] x L]}
// counts[l][e]: positions routed to expert e of layer l (after trims); layers
// without experts hold zeros.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/output_file.h"
#include "moe/expert_cache.h"

namespace sluice::moe {

struct ExpertUsage {
  std::string model;  // file name, for messages
  int n_layer = 0;
  int n_expert = 0;
  uint64_t tokens = 0;          // positions evaluated while counting
  std::vector<uint64_t> counts;  // [n_layer][n_expert]

  uint64_t count(int layer, int expert) const {
    return counts[static_cast<size_t>(layer) * static_cast<size_t>(n_expert) + static_cast<size_t>(expert)];
  }
  // The used experts, most used first (ties: lower layer, then lower id);
  // experts never used are left out.
  std::vector<ExpertKey> by_use() const;
};

// Writes through io::OutputFile (temporary file renamed at the end). Throws
// Error naming opts.flag and the path on failure.
void write_expert_usage(const ExpertUsage& u, const std::string& path, io::OutputOptions opts);
// Throws Error naming `flag` and the path for a missing, malformed or
// inconsistent file.
ExpertUsage read_expert_usage(const std::string& path, const std::string& flag);

}  // namespace sluice::moe
