// Next-token selection from a row of logits.
//
// temperature <= 0 means greedy: the argmax, ties -> lowest id (as the golden
// reference). Otherwise the pipeline is: repetition penalty (llama.cpp style:
// positive logits divided, negative multiplied, over the last repeat_last_n
// tokens) -> top-k -> softmax with temperature -> top-p -> min-p -> draw with a
// seeded mt19937 (the same seed gives the same tokens).
//
// A constraint (set_constraint) restricts sample() to the tokens it allows:
// a drawn token it refuses is removed from the distribution and the draw
// repeated, which samples exactly the kept distribution masked to allowed
// tokens and renormalised (greedy: the best allowed token). When the kept
// candidates are all refused, or after kMaxRejections refusals, the whole
// vocabulary is scanned once in logit order and the first allowed token
// wins, so a step always ends. Without a constraint nothing changes: the
// same draws from the same generator.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

namespace sluice::runtime {

struct SamplerConfig {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

// Index of the largest value; ties -> lowest index. Empty input -> -1.
int32_t argmax(std::span<const float> logits);

// The distribution a Sampler draws from for one row of logits: the kept
// candidates in order and their weights (proportional to the probabilities;
// `total` is their sum). Greedy: the argmax alone, weight 1.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> w;
  double total = 0;
  double prob(int32_t id) const;  // 0 for an id not kept
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& cfg);
  bool greedy() const { return cfg_.temperature <= 0.0f; }
  // `history`: tokens so far (prompt + generated), for the repetition penalty.
  // With a constraint that allows no token at all: -1.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  // allowed(id): whether id may be the next token (called for candidates
  // only, in draw order). An empty function removes the constraint.
  // Speculative decoding (distribution/draw/accept_or_resample) ignores it;
  // Session::generate samples a constrained sampler token by token.
  void set_constraint(std::function<bool(int32_t)> allowed) { allowed_ = std::move(allowed); }
  bool constrained() const { return static_cast<bool>(allowed_); }
  // observe(logits, id): called by sample() with the row it drew from and the
  // token it returned (not for -1), e.g. to report log-probabilities. Like a
  // constraint it makes Session::generate sample token by token (the
  // speculative path never calls sample()). An empty function removes it.
  void set_observer(std::function<void(std::span<const float>, int32_t)> observe) { observe_ = std::move(observe); }
  // Whether Session::generate must call sample() for every token.
  bool token_by_token() const { return allowed_ || observe_; }
  static constexpr int kMaxRejections = 64;
  // The distribution sample() draws from, and the draw itself (sample() is
  // draw(distribution(...)); a greedy draw uses no randomness).
  TokenDist distribution(std::span<const float> logits, std::span<const int32_t> history);
  int32_t draw(const TokenDist& d);
  // Speculative sampling's acceptance of a draft token drawn from the draft
  // distribution q, against the target p (Leviathan et al. / Chen et al.):
  // accepted with probability min(1, p(x)/q(x)); on rejection the returned
  // token is drawn from norm(max(0, p - q)), and `accepted` is false. This
  // keeps the output distributed exactly as p. Greedy p and q: accepted iff
  // x is p's argmax, otherwise p's argmax is returned (no randomness).
  int32_t accept_or_resample(const TokenDist& p, const TokenDist& q, int32_t x, bool& accepted);
  // A uniform draw in [0, 1) from the sampler's generator.
  double uniform();

 private:
  SamplerConfig cfg_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<int32_t> ids_;
  std::function<bool(int32_t)> allowed_;
  std::function<void(std::span<const float>, int32_t)> observe_;

  int32_t sample_constrained(std::span<const float> logits, std::span<const int32_t> history);
};

}  // namespace sluice::runtime
