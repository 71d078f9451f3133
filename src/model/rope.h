// Rotary position embedding (RoPE) in ggml's formulation (see RopeParams in
// hparams.h): pair j (0 <= j < n_rot/2) is rotated by angle
// pos * theta^(-2j/n_rot), the angle built by repeated multiplication in float
// as ggml does; with YaRN the angle and the cos/sin magnitude follow ggml's
// rope_yarn. Dimensions at and beyond n_rot pass through unchanged.
//   Norm (llama):             pairs (2j, 2j+1)
//   Neox (qwen3moe, gpt-oss): pairs (j, j + n_rot/2)
#pragma once

#include <cstdint>
#include <vector>

#include "model/hparams.h"

namespace sluice::model {

// cos/sin of every pair's angle at one position.
class RopeAngles {
 public:
  // freq_factors (optional, n_rot/2 values, kept by pointer): pair j's angle
  // is divided by freq_factors[j] (ggml's rope freq_factors; Gemma 4's rope_freqs).
  explicit RopeAngles(const RopeParams& p, const float* freq_factors = nullptr);
  void set_position(int64_t pos);
  int n_rot() const { return n_rot_; }
  const float* cos() const { return cos_.data(); }
  const float* sin() const { return sin_.data(); }

 private:
  int n_rot_;
  float theta_scale_;
  // YaRN (freq_scale_ == 1 and ext_factor_ == 0 without it).
  float freq_scale_ = 1.0f;
  float ext_factor_ = 0.0f;
  float mscale_ = 1.0f;
  float corr_low_ = 0.0f, corr_high_ = 0.0f;
  const float* freq_factors_ = nullptr;
  std::vector<float> cos_, sin_;  // n_rot/2 each
};

// Rotates n_heads consecutive heads of head_dim floats in place.
void apply_rope(float* x, int n_heads, int head_dim, const RopeAngles& angles, RopeType type);

}  // namespace sluice::model
