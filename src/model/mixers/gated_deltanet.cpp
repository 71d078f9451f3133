#include "model/mixers/gated_deltanet.h"

#include <algorithm>
#include <cmath>

#include "kernels/deltanet.h"
#include "model/activation.h"
#include "model/norm.h"

namespace sluice::model {

std::vector<float> deltanet_conv_taps(const float* conv1d, uint32_t K, uint64_t C) {
  std::vector<float> w(static_cast<size_t>(K) * C);
  for (uint64_t c = 0; c < C; ++c)
    for (uint32_t i = 0; i < K; ++i) w[static_cast<size_t>(i) * C + c] = conv1d[c * K + i];
  return w;
}

DeltaNetWeights bind_deltanet(Binder& b, const std::string& p, const HParams& hp) {
  const DeltaNetParams& dn = hp.deltanet;
  const uint64_t n_embd = hp.n_embd;
  DeltaNetWeights w;
  w.qkv = b.matrix(p + "attn_qkv.weight", n_embd, dn.channels());
  w.gate = b.matrix(p + "attn_gate.weight", n_embd, dn.inner());
  w.alpha = b.matrix(p + "ssm_alpha.weight", n_embd, dn.n_v_heads);
  w.beta = b.matrix(p + "ssm_beta.weight", n_embd, dn.n_v_heads);
  w.out = b.matrix(p + "ssm_out.weight", dn.inner(), n_embd);
  w.dt_bias = b.vector(p + "ssm_dt.bias", dn.n_v_heads);
  w.a = b.vector(p + "ssm_a", dn.n_v_heads);
  w.norm = b.vector(p + "ssm_norm.weight", dn.state_size);
  w.conv_w = deltanet_conv_taps(b.f32(p + "ssm_conv1d.weight", {dn.conv_kernel, dn.channels()}), dn.conv_kernel,
                                dn.channels());
  return w;
}

void GatedDeltaNet::run(const DeltaNetWeights& w, const HParams& hp, const float* xn, int T, DeltaNetStateView state,
                        float* out, ThreadPool& pool, QuantizedRows& act) {
  const DeltaNetParams& p = hp.deltanet;
  const int64_t S = p.state_size, nk = p.n_k_heads, nv = p.n_v_heads, K = p.conv_kernel;
  const int64_t C = static_cast<int64_t>(p.channels()), inner = static_cast<int64_t>(p.inner());
  const float eps = hp.rms_eps;
  const kernels::OpsKernels& ops = kernels::ops();
  const size_t rows = static_cast<size_t>(T);
  qkv_.resize(rows * C);
  conv_.resize(rows * C);
  z_.resize(rows * inner);
  alpha_.resize(rows * nv);
  beta_.resize(rows * nv);
  decay_.resize(rows * nv);
  o_.resize(rows * inner);
  matmul_f32(w.qkv, xn, T, qkv_.data(), pool, act);
  matmul_f32(w.gate, xn, T, z_.data(), pool, act);
  matmul_f32(w.alpha, xn, T, alpha_.data(), pool, act);
  matmul_f32(w.beta, xn, T, beta_.data(), pool, act);

  // Causal conv through the cached taps, one token at a time (the same bits
  // however the sequence is split), then SiLU.
  const size_t conv_floats = static_cast<size_t>(deltanet_conv_floats(p));
  for (int t = 0; t < T; ++t) {
    ops.conv_step(state.conv, &qkv_[t * C], w.conv_w.data(), K, C, &conv_[t * C]);
    if (t < state.n_row_dst) std::copy_n(state.conv, conv_floats, state.row_dst[t]);
  }
  for (float& x : conv_) x = silu(x);
  // q and k L2-normalised per head (ggml_l2_norm: x / max(||x||, eps)); q
  // also takes the 1/sqrt(S) output scale.
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (int t = 0; t < T; ++t) {
    for (int64_t h = 0; h < 2 * nk; ++h) {
      float* x = &conv_[t * C + h * S];
      l2_norm(x, S, eps);
      if (h < nk) ops.scale_mul(x, q_scale, nullptr, x, S);
    }
  }
  // Per value head: decay exp(g), g = softplus(alpha + dt_bias) * a (ggml's
  // softplus: x above 20 passes through), and beta = sigmoid(beta).
  for (int t = 0; t < T; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      const size_t i = static_cast<size_t>(t) * nv + h;
      const float a = alpha_[i] + w.dt_bias[h];
      const float softplus = a > 20.0f ? a : std::log(1.0f + std::exp(a));
      decay_[i] = std::exp(softplus * w.a[h]);
      beta_[i] = sigmoid(beta_[i]);
    }
  }
  // The delta rule: heads in parallel, each walking its tokens in order.
  pool.parallel_for(nv, [&](int64_t h0, int64_t h1) {
    std::vector<float> u(static_cast<size_t>(S));
    for (int64_t h = h0; h < h1; ++h) {
      float* M = state.matrices + h * S * S;
      const int64_t kh = h % nk;  // the converter tiles the value heads over the key heads
      for (int t = 0; t < T; ++t) {
        const float* row = &conv_[t * C];
        const size_t i = static_cast<size_t>(t) * nv + h;
        ops.delta_step(M, row + kh * S, row + (nk + kh) * S, row + 2 * nk * S + h * S, decay_[i], beta_[i], S,
                       u.data(), &o_[t * inner + h * S]);
        if (t < state.n_row_dst) std::copy_n(M, S * S, state.row_dst[t] + conv_floats + h * S * S);
      }
    }
  });
  // Gated RMSNorm per head: RMSNorm(o) * ssm_norm * SiLU(z), into z_.
  for (int t = 0; t < T; ++t) {
    float* o = &o_[t * inner];
    for (int64_t h = 0; h < nv; ++h) rms_norm(o + h * S, w.norm, S, eps, o + h * S);
    ops.swiglu(&z_[t * inner], o, inner);
  }
  matmul_f32(w.out, z_.data(), T, out, pool, act);
}

}  // namespace sluice::model
