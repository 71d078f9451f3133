#include "model/mixers/gqa_attention.h"

#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "model/norm.h"

namespace sluice::model {

GqaWeights bind_gqa(Binder& b, const std::string& p, const AttentionDesc& d, const HParams& hp) {
  const uint64_t n_embd = hp.n_embd;
  GqaWeights w;
  w.output_gate = d.output_gate;
  w.wq = b.matrix(p + "attn_q.weight", n_embd, uint64_t{hp.q_dim()} * (d.output_gate ? 2 : 1));
  w.wk = b.matrix(p + "attn_k.weight", n_embd, hp.k_dim());
  w.wv = b.matrix(p + "attn_v.weight", n_embd, hp.v_dim());
  w.wo = b.matrix(p + "attn_output.weight", uint64_t{hp.n_head} * hp.head_dim_v, n_embd);
  w.bq = b.vector_if(d.q_bias, p + "attn_q.bias", {hp.q_dim()});
  w.bk = b.vector_if(d.k_bias, p + "attn_k.bias", {hp.k_dim()});
  w.bv = b.vector_if(d.v_bias, p + "attn_v.bias", {hp.v_dim()});
  w.q_norm = b.vector_if(d.q_norm, p + "attn_q_norm.weight", {hp.head_dim});
  w.k_norm = b.vector_if(d.k_norm, p + "attn_k_norm.weight", {hp.head_dim});
  return w;
}

void GqaAttention::run(const GqaWeights& L, const AttentionOptions& opt, const HParams& hp_, const float* xn, int T,
                       int pos0, int layer, KvRows& kv, RopeAngles& rope_, QuantizedRows& act_, ThreadPool& pool_,
                       float* out) {
  const int hd = static_cast<int>(hp_.head_dim);
  const float eps = hp_.rms_eps;
  const kernels::OpsKernels& ops = kernels::ops();
  auto add_rows = [&](float* x, const float* bias, int64_t n) {
    if (bias)
      for (int t = 0; t < T; ++t) ops.add(x + static_cast<int64_t>(t) * n, bias, n);
  };
  q_.resize(static_cast<size_t>(T) * hp_.q_dim());
  k_.resize(static_cast<size_t>(T) * hp_.k_dim());
  v_.resize(static_cast<size_t>(T) * hp_.v_dim());
  if (L.output_gate) {
    // Queries to q_; the gates stay in q_gate_ until the output.
    q_gate_.resize(static_cast<size_t>(T) * 2 * hp_.q_dim());
    matmul_f32(L.wq, xn, T, q_gate_.data(), pool_, act_);
    for (int64_t r = 0; r < static_cast<int64_t>(T) * hp_.n_head; ++r)
      std::memcpy(&q_[static_cast<size_t>(r) * hd], &q_gate_[static_cast<size_t>(r) * 2 * hd], sizeof(float) * hd);
  } else {
    matmul_f32(L.wq, xn, T, q_.data(), pool_, act_);
  }
  matmul_f32(L.wk, xn, T, k_.data(), pool_, act_);
  matmul_f32(L.wv, xn, T, v_.data(), pool_, act_);
  add_rows(q_.data(), L.bq, hp_.q_dim());
  add_rows(k_.data(), L.bk, hp_.k_dim());
  add_rows(v_.data(), L.bv, hp_.v_dim());
  if (L.q_norm) rms_norm_rows(q_.data(), L.q_norm, static_cast<int64_t>(T) * hp_.n_head, hd, eps, q_.data());
  if (L.k_norm) rms_norm_rows(k_.data(), L.k_norm, static_cast<int64_t>(T) * hp_.n_head_kv, hd, eps, k_.data());
  for (int t = 0; t < T; ++t) {
    rope_.set_position(pos0 + t);
    apply_rope(&q_[static_cast<size_t>(t) * hp_.q_dim()], static_cast<int>(hp_.n_head), hd, rope_, hp_.rope.type);
    apply_rope(&k_[static_cast<size_t>(t) * hp_.k_dim()], static_cast<int>(hp_.n_head_kv), hd, rope_,
               hp_.rope.type);
    kv.store(pos0 + t, &k_[static_cast<size_t>(t) * hp_.k_dim()], &v_[static_cast<size_t>(t) * hp_.v_dim()]);
  }
  attn_.resize(static_cast<size_t>(T) * hp_.n_head * hp_.head_dim_v);
  attention_.run(q_.data(), T, pos0, layer, kv, hp_, opt, attn_.data(), pool_);
  if (L.output_gate)  // output *= sigmoid(gate), per head before attn_output (head_dim_v == head_dim)
    for (int64_t r = 0; r < static_cast<int64_t>(T) * hp_.n_head; ++r) {
      const float* g = &q_gate_[static_cast<size_t>(r) * 2 * hd + hd];
      float* o = &attn_[static_cast<size_t>(r) * hd];
      for (int i = 0; i < hd; ++i) o[i] *= 1.0f / (1.0f + std::exp(-g[i]));
    }
  matmul_f32(L.wo, attn_.data(), T, out, pool_, act_);
}

}  // namespace sluice::model
