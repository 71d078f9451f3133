#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/ops.h"

namespace sluice::model {
namespace {

// ggml_rope_yarn_corr_dim: the dimension whose wavelength fits n_rot_turns
// turns into the original context.
float yarn_corr_dim(int n_dims, uint32_t n_ctx_orig, float n_rot_turns, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot_turns * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

}  // namespace

RopeAngles::RopeAngles(const RopeParams& p, const float* freq_factors)
    : n_rot_(static_cast<int>(p.n_rot)),
      theta_scale_(std::pow(p.theta, -2.0f / static_cast<float>(p.n_rot))),
      cos_(static_cast<size_t>(p.n_rot / 2)),
      sin_(static_cast<size_t>(p.n_rot / 2)) {
  freq_factors_ = freq_factors;
  mscale_ = p.attn_factor;
  if (p.yarn_factor > 0.0f) {
    freq_scale_ = 1.0f / p.yarn_factor;
    ext_factor_ = p.ext_factor;
    const float start = std::floor(yarn_corr_dim(n_rot_, p.yarn_orig_ctx, p.beta_fast, p.theta));
    const float end = std::ceil(yarn_corr_dim(n_rot_, p.yarn_orig_ctx, p.beta_slow, p.theta));
    corr_low_ = std::max(0.0f, start);
    corr_high_ = std::min(static_cast<float>(n_rot_ - 1), end);
    if (ext_factor_ != 0.0f) mscale_ *= 1.0f + 0.1f * std::log(1.0f / freq_scale_);
  }
}

void RopeAngles::set_position(int64_t pos) {
  float theta = static_cast<float>(pos);
  for (int j = 0; j < n_rot_ / 2; ++j) {
    float angle = freq_factors_ ? theta / freq_factors_[j] : theta;
    if (freq_scale_ != 1.0f || ext_factor_ != 0.0f) {
      const float extrap = angle;
      const float interp = freq_scale_ * extrap;
      angle = interp;
      if (ext_factor_ != 0.0f) {
        // ggml's rope_yarn_ramp over the pair index (its i0 / 2).
        const float y = (static_cast<float>(j) - corr_low_) / std::max(0.001f, corr_high_ - corr_low_);
        const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * ext_factor_;
        angle = interp * (1.0f - ramp_mix) + extrap * ramp_mix;
      }
    }
    cos_[j] = std::cos(angle) * mscale_;
    sin_[j] = std::sin(angle) * mscale_;
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
