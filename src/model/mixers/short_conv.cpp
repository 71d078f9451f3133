#include "model/mixers/short_conv.h"

#include "kernels/deltanet.h"
#include "model/mixers/gated_deltanet.h"

namespace sluice::model {

ShortConvWeights bind_short_conv(Binder& b, const std::string& p, const HParams& hp, uint32_t L) {
  const uint64_t n_embd = hp.n_embd;
  ShortConvWeights w;
  w.L = L;
  w.in_proj = b.matrix(p + "shortconv.in_proj.weight", n_embd, 3 * n_embd);
  w.out_proj = b.matrix(p + "shortconv.out_proj.weight", n_embd, n_embd);
  // ggml ne {L, n_embd}: channel c's L taps are contiguous, as DeltaNet's ssm_conv1d.
  w.taps = deltanet_conv_taps(b.f32(p + "shortconv.conv.weight", {L, n_embd}), L, n_embd);
  return w;
}

void ShortConv::run(const ShortConvWeights& w, const HParams& hp, const float* xn, int T, float* conv_state,
                    float* out, ThreadPool& pool, QuantizedRows& act) {
  const int64_t E = hp.n_embd, L = w.L;
  const kernels::OpsKernels& ops = kernels::ops();
  const size_t rows = static_cast<size_t>(T);
  bcx_.resize(rows * 3 * E);
  bx_.resize(static_cast<size_t>(E));
  y_.resize(rows * E);
  matmul_f32(w.in_proj, xn, T, bcx_.data(), pool, act);
  for (int t = 0; t < T; ++t) {
    const float* B = &bcx_[static_cast<size_t>(t) * 3 * E];
    const float* C = B + E;
    const float* x = B + 2 * E;
    float* y = &y_[static_cast<size_t>(t) * E];
    for (int64_t c = 0; c < E; ++c) bx_[c] = B[c] * x[c];
    ops.conv_step(conv_state, bx_.data(), w.taps.data(), L, E, y);
    for (int64_t c = 0; c < E; ++c) y[c] *= C[c];
  }
  matmul_f32(w.out_proj, y_.data(), T, out, pool, act);
}

}  // namespace sluice::model
