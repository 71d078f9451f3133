#include "model/ffn.h"

#include "kernels/ops.h"

namespace sluice::model {
namespace {

// Below this many elements the activation is cheaper than waking the pool.
constexpr int64_t kMinParallelElements = 16 * 1024;

}  // namespace

void SwiGlu::run(const FfnMatrices& m, std::span<const void* const> act_gate, std::span<const void* const> act_up,
                 float* out, int64_t out_stride, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(act_gate.size());
  const int64_t n_ff = m.gate.n_out;
  g_.resize(static_cast<size_t>(n * n_ff));
  u_.resize(static_cast<size_t>(n * n_ff));
  matmul(m.gate, act_gate, g_.data(), n_ff, pool);
  matmul(m.up, act_up, u_.data(), n_ff, pool);
  // Element-wise, so splitting rows over threads cannot change any value.
  auto act = [&](int64_t b, int64_t e) { kernels::ops().swiglu(&g_[b * n_ff], &u_[b * n_ff], (e - b) * n_ff); };
  if (pool.size() > 1 && n > 1 && n * n_ff >= kMinParallelElements) {
    pool.parallel_for(n, act);
  } else {
    act(0, n);
  }
  hidden_q_.quantize(m.down.kern->vec_dot_type, g_.data(), n, n_ff, n_ff, &pool);
  hidden_rows_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) hidden_rows_[i] = hidden_q_.row(i);
  matmul(m.down, hidden_rows_, out, out_stride, pool);
}

}  // namespace sluice::model
