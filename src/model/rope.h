// Rotary position embedding (RoPE), ggml's formulation without YaRN scaling:
// pair j (0 <= j < n_rot/2) is rotated by angle pos * theta^(-2j/n_rot), the
// angle built by repeated multiplication in float as ggml does. Dimensions at
// and beyond n_rot pass through unchanged.
//   Norm (llama):    pairs (2j, 2j+1)
//   Neox (qwen3moe): pairs (j, j + n_rot/2)
#pragma once

#include <cstdint>
#include <vector>

#include "model/hparams.h"

namespace sluice::model {

// cos/sin of every pair's angle at one position.
class RopeAngles {
 public:
  RopeAngles(int n_rot, float freq_base);
  void set_position(int64_t pos);
  int n_rot() const { return n_rot_; }
  const float* cos() const { return cos_.data(); }
  const float* sin() const { return sin_.data(); }

 private:
  int n_rot_;
  float theta_scale_;
  std::vector<float> cos_, sin_;  // n_rot/2 each
};

// Rotates n_heads consecutive heads of head_dim floats in place.
void apply_rope(float* x, int n_heads, int head_dim, const RopeAngles& angles, RopeType type);

}  // namespace sluice::model
