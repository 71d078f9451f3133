#include "model/ffn.h"

#include "kernels/ops.h"

namespace sluice::model {

void SwiGlu::run(const FfnMatrices& m, std::span<const void* const> act_gate, std::span<const void* const> act_up,
                 float* out, int64_t out_stride, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(act_gate.size());
  const int64_t n_ff = m.gate.n_out;
  g_.resize(static_cast<size_t>(n * n_ff));
  u_.resize(static_cast<size_t>(n * n_ff));
  matmul(m.gate, act_gate, g_.data(), n_ff, pool);
  matmul(m.up, act_up, u_.data(), n_ff, pool);
  kernels::ops().swiglu(g_.data(), u_.data(), n * n_ff);
  hidden_q_.quantize(m.down.kern->vec_dot_type, g_.data(), n, n_ff, n_ff, &pool);
  hidden_rows_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) hidden_rows_[i] = hidden_q_.row(i);
  matmul(m.down, hidden_rows_, out, out_stride, pool);
}

}  // namespace sluice::model
