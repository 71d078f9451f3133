#include "model/ffn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace sluice::model {
namespace {

// llama.cpp's swiglu_oai constants (gpt-oss).
constexpr float kOaiAlpha = 1.702f;
constexpr float kOaiLimit = 7.0f;

void add_bias(float* x, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += b[i];
}

}  // namespace

void apply_activation(Activation act, float* g, const float* u, int64_t n, float clamp) {
  if (act == Activation::SwiGluClamped && clamp > 1e-6f) {
    thread_local std::vector<float> uc;  // the clamped up values (u is the caller's)
    uc.assign(u, u + n);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = std::min(g[i], clamp);
      uc[i] = std::clamp(uc[i], -clamp, clamp);
    }
    kernels::ops().swiglu(g, uc.data(), n);
    return;
  }
  if (act == Activation::SwiGlu || act == Activation::SwiGluClamped) {
    kernels::ops().swiglu(g, u, n);
    return;
  }
  if (act == Activation::GeluTanh) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in F32 (llama.cpp's CPU
    // backend reads an F16 table instead; the golden tolerances cover both).
    constexpr float kSqrt2OverPi = 0.79788456080286535588f;
    for (int64_t i = 0; i < n; ++i) {
      const float x = g[i];
      g[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x))) * u[i];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(g[i], kOaiLimit);
    const float y = std::clamp(u[i], -kOaiLimit, kOaiLimit);
    g[i] = x / (1.0f + std::exp(kOaiAlpha * (-x))) * (y + 1.0f);
  }
}

void SwiGlu::run(const FfnMatrices& m, Activation act, const FfnBiases& bias, std::span<const void* const> act_gate,
                 std::span<const void* const> act_up, float* out, int64_t out_stride, ThreadPool& pool,
                 float clamp) {
  const int64_t n = static_cast<int64_t>(act_gate.size());
  const int64_t n_ff = m.gate.n_out;
  g_.resize(static_cast<size_t>(n * n_ff));
  u_.resize(static_cast<size_t>(n * n_ff));
  // gate, up and the activation split over hidden units (each thread reads
  // its share of the weight rows once, for every position), then the hidden
  // rows converted for down. Splitting positions instead made every thread
  // stream the whole of gate and up (pp64 of a 30B-A3B in RAM: 39.5 against
  // 45.7 tok/s by units, docs/benchmarks.md "Prefill"; pp512 unchanged).
  // Each element is computed exactly as by separate matmuls + an
  // element-wise pass, so the split changes no value.
  // Tile-GEMM weights (AMX) re-lay the positions once for all row ranges.
  const TiledActivations* tiled_gate = nullptr;
  const TiledActivations* tiled_up = nullptr;
  if (m.gate.kern->gemm_tile && m.up.kern == m.gate.kern && n > 1) {
    tiled_gate_.prepare(*m.gate.kern, m.gate.n_in, act_gate, &pool);
    tiled_gate = &tiled_gate_;
    if (std::ranges::equal(act_up, act_gate)) {  // the same rows (e.g. one norm feeds both)
      tiled_up = tiled_gate;
    } else {
      tiled_up_.prepare(*m.up.kern, m.up.n_in, act_up, &pool);
      tiled_up = &tiled_up_;
    }
  }
  auto by_units = [&](int64_t r0, int64_t r1) {
    matmul_rows(m.gate, act_gate, g_.data(), n_ff, r0, r1, tiled_gate);
    matmul_rows(m.up, act_up, u_.data(), n_ff, r0, r1, tiled_up);
    for (int64_t i = 0; i < n; ++i) {
      if (bias.gate) add_bias(&g_[i * n_ff + r0], bias.gate + r0, r1 - r0);
      if (bias.up) add_bias(&u_[i * n_ff + r0], bias.up + r0, r1 - r0);
      apply_activation(act, &g_[i * n_ff + r0], &u_[i * n_ff + r0], r1 - r0, clamp);
    }
  };
  if (worth_parallel(pool, n_ff, 2 * n * n_ff * m.gate.n_in)) {
    // Packed gate/up: ranges start at group boundaries (speed only).
    pool.parallel_for(n_ff, by_units, std::max(row_grain(m.gate), row_grain(m.up)));
  } else {
    by_units(0, n_ff);
  }
  hidden_q_.quantize(m.down.kern->vec_dot_type, g_.data(), n, n_ff, n_ff, &pool);
  hidden_rows_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) hidden_rows_[i] = hidden_q_.row(i);
  matmul(m.down, hidden_rows_, out, out_stride, pool);
  if (bias.down)
    for (int64_t i = 0; i < n; ++i) add_bias(out + i * out_stride, bias.down, m.down.n_out);
}

}  // namespace sluice::model
