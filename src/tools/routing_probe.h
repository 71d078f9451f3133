// Router statistics of a MoE layer evaluated on the token embeddings: the
// top-k expert hit counts of ffn_gate_inp(RMSNorm(embedding) * ffn_norm) (+ the
// router bias where there is one; gpt-oss's pre-FFN norm is post_attention_norm)
// for a set of token ids. Used to check that synthesized models route unevenly (a
// proxy for the real layer-0 input, which also includes the attention output).
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf.h"

namespace sluice::tools {

struct RoutingStats {
  uint32_t layer = 0, n_expert = 0, top_k = 0;
  uint64_t n_tokens = 0;
  std::vector<uint64_t> hits;  // per expert: tokens that selected it among their top-k
  // Fraction of all n_tokens * top_k selections taken by the busiest expert.
  double top_share() const;
  double uniform_share() const { return n_expert ? 1.0 / n_expert : 0; }
};

// Evaluates up to max_tokens token ids spread evenly over the vocabulary.
// Throws sluice::Error naming the file when the layer's router, norm or the
// embeddings are missing or of an unreadable type.
RoutingStats probe_routing(const gguf::GgufModel& model, uint32_t layer, uint64_t max_tokens = 4096);

}  // namespace sluice::tools
