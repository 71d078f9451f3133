#include "model/rope.h"

#include <cmath>

#include "kernels/ops.h"

namespace sluice::model {

RopeAngles::RopeAngles(int n_rot, float freq_base)
    : n_rot_(n_rot),
      theta_scale_(std::pow(freq_base, -2.0f / static_cast<float>(n_rot))),
      cos_(static_cast<size_t>(n_rot / 2)),
      sin_(static_cast<size_t>(n_rot / 2)) {}

void RopeAngles::set_position(int64_t pos) {
  float theta = static_cast<float>(pos);
  for (int j = 0; j < n_rot_ / 2; ++j) {
    cos_[j] = std::cos(theta);
    sin_[j] = std::sin(theta);
    theta *= theta_scale_;
  }
}

void apply_rope(float* x, int n_heads, int head_dim, const RopeAngles& angles, RopeType type) {
  const int half = angles.n_rot() / 2;
  const kernels::OpsKernels& k = kernels::ops();
  const auto rotate = type == RopeType::Norm ? k.rope_norm : k.rope_neox;
  for (int h = 0; h < n_heads; ++h) rotate(x + static_cast<int64_t>(h) * head_dim, angles.cos(), angles.sin(), half);
}

}  // namespace sluice::model
