#include "model/mixers/kda.h"

#include <algorithm>
#include <cmath>

#include "kernels/deltanet.h"
#include "model/activation.h"
#include "model/norm.h"

namespace sluice::model {

KdaWeights bind_kda(Binder& b, const std::string& p, const HParams& hp) {
  const DeltaNetParams& dn = hp.deltanet;
  const uint64_t n_embd = hp.n_embd, D = dn.inner(), H = dn.n_v_heads;
  KdaWeights w;
  w.q = b.matrix(p + "attn_q.weight", n_embd, D);
  w.k = b.matrix(p + "attn_k.weight", n_embd, D);
  w.v = b.matrix(p + "attn_v.weight", n_embd, D);
  w.f_a = b.matrix(p + "ssm_f_a.weight", n_embd, D);
  w.beta = b.matrix(p + "ssm_beta.weight", n_embd, H);
  w.g_a = b.matrix(p + "ssm_g_a.weight", n_embd, D);
  w.out = b.matrix(p + "attn_output.weight", D, n_embd);
  w.dt_bias = b.vector(p + "ssm_dt.bias", D);
  w.a = b.f32(p + "ssm_a", {1, H});
  w.norm = b.vector(p + "ssm_norm.weight", dn.state_size);
  const char* conv[3] = {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"};
  for (int i = 0; i < 3; ++i)
    w.conv_w[i] = deltanet_conv_taps(b.f32(p + conv[i], {dn.conv_kernel, 1, D}), dn.conv_kernel, D);
  return w;
}

void KimiDeltaAttention::run(const KdaWeights& w, const HParams& hp, const float* xn, int T, DeltaNetStateView state,
                             float* out, ThreadPool& pool, QuantizedRows& act) {
  const DeltaNetParams& p = hp.deltanet;
  const int64_t S = p.state_size, H = p.n_v_heads, K = p.conv_kernel, D = static_cast<int64_t>(p.inner());
  const float eps = hp.rms_eps;
  const kernels::OpsKernels& ops = kernels::ops();
  const size_t rows = static_cast<size_t>(T);
  const WeightMatrix* proj_w[3] = {&w.q, &w.k, &w.v};
  for (int i = 0; i < 3; ++i) {
    proj_[i].resize(rows * D);
    conv_[i].resize(rows * D);
    matmul_f32(*proj_w[i], xn, T, proj_[i].data(), pool, act);
  }
  gate_.resize(rows * D);
  g_.resize(rows * D);
  beta_.resize(rows * H);
  o_.resize(rows * D);
  matmul_f32(w.f_a, xn, T, gate_.data(), pool, act);
  matmul_f32(w.g_a, xn, T, g_.data(), pool, act);
  matmul_f32(w.beta, xn, T, beta_.data(), pool, act);

  // q, k, v: each its own causal conv through its cached taps, one token at a
  // time (the same bits however the sequence is split), then SiLU.
  const int64_t taps = (K - 1) * D;
  const size_t conv_floats = static_cast<size_t>(3 * taps);
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < 3; ++i)
      ops.conv_step(state.conv + i * taps, &proj_[i][t * D], w.conv_w[i].data(), K, D, &conv_[i][t * D]);
    if (t < state.n_row_dst) std::copy_n(state.conv, conv_floats, state.row_dst[t]);
  }
  for (auto& c : conv_)
    for (float& x : c) x = silu(x);
  // q and k L2-normalised per head; q takes the 1/sqrt(S) output scale.
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (int t = 0; t < T; ++t) {
    for (int qk = 0; qk < 2; ++qk) {
      for (int64_t h = 0; h < H; ++h) {
        float* x = &conv_[qk][t * D + h * S];
        l2_norm(x, S, eps);
        if (qk == 0) ops.scale_mul(x, q_scale, nullptr, x, S);
      }
    }
  }
  // Per channel: decay = exp(lower_bound * sigmoid(a[h] (f_a x + dt_bias)));
  // per head: beta = sigmoid(beta).
  for (int t = 0; t < T; ++t) {
    for (int64_t c = 0; c < D; ++c) {
      float& g = gate_[t * D + c];
      const float z = (g + w.dt_bias[c]) * w.a[c / S];
      g = std::exp(p.gate_lower_bound * sigmoid(z));
    }
    for (int64_t h = 0; h < H; ++h) {
      float& b = beta_[static_cast<size_t>(t) * H + h];
      b = sigmoid(b);
    }
  }
  // The delta rule: heads in parallel, each walking its tokens in order.
  pool.parallel_for(H, [&](int64_t h0, int64_t h1) {
    std::vector<float> u(static_cast<size_t>(S));
    for (int64_t h = h0; h < h1; ++h) {
      float* M = state.matrices + h * S * S;
      for (int t = 0; t < T; ++t) {
        const int64_t at = t * D + h * S;
        ops.kda_step(M, &conv_[0][at], &conv_[1][at], &conv_[2][at], &gate_[at], beta_[static_cast<size_t>(t) * H + h],
                     S, u.data(), &o_[at]);
        if (t < state.n_row_dst) std::copy_n(M, S * S, state.row_dst[t] + conv_floats + h * S * S);
      }
    }
  });
  // RMSNorm(o) * ssm_norm * sigmoid(g_a x) per head, into g_.
  for (int t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      float* o = &o_[t * D + h * S];
      rms_norm(o, w.norm, S, eps, o);
      float* g = &g_[t * D + h * S];
      for (int64_t i = 0; i < S; ++i) g[i] = o[i] * sigmoid(g[i]);
    }
  }
  matmul_f32(w.out, g_.data(), T, out, pool, act);
}

}  // namespace sluice::model
