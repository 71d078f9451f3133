#include "model/norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace sluice::model {

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  const kernels::OpsKernels& k = kernels::ops();
  const double sum = k.sum_squares(x, n);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  k.scale_mul(x, scale, w, y, n);
}

void rms_norm_rows(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < n_rows; ++r) rms_norm(x + r * n, w, n, eps, y + r * n);
}

void l2_norm(float* x, int64_t n, float eps) {
  const kernels::OpsKernels& k = kernels::ops();
  const float norm = std::sqrt(static_cast<float>(k.sum_squares(x, n)));
  k.scale_mul(x, 1.0f / std::max(norm, eps), nullptr, x, n);
}

}  // namespace sluice::model
