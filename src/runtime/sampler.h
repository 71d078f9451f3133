// Next-token selection from a row of logits.
//
// temperature <= 0 means greedy: the argmax, ties -> lowest id (as the golden
// reference). Otherwise the pipeline is: repetition penalty (llama.cpp style:
// positive logits divided, negative multiplied, over the last repeat_last_n
// tokens) -> top-k -> softmax with temperature -> top-p -> min-p -> draw with a
// seeded mt19937 (the same seed gives the same tokens).
#pragma once

#include <cstdint>
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

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& cfg);
  // `history`: tokens so far (prompt + generated), for the repetition penalty.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplerConfig cfg_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<int32_t> ids_;
};

}  // namespace sluice::runtime
