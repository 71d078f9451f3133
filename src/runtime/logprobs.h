// Log-probabilities of sampled tokens, as OpenAI's `logprobs` report them:
// the log-softmax of the model's raw logits for the row the token was drawn
// from (before temperature, penalties or any truncation, so the values do not
// depend on the sampling settings and match `sluice logits` on the same
// tokens), plus the n most likely tokens of that row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::runtime {

struct TokenLogprob {
  int32_t id = -1;
  float logprob = 0;
  // The `top` most likely tokens of the row, most likely first (ties: lower id first).
  std::vector<std::pair<int32_t, float>> top;
};

// The most top_logprobs OpenAI allows, and so the most sluice computes.
inline constexpr int kMaxTopLogprobs = 20;

// `id`'s log-probability in `logits` and the n_top (0..kMaxTopLogprobs)
// best tokens. The sum is taken in double over the whole row.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int n_top);

}  // namespace sluice::runtime
