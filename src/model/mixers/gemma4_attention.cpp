#include "model/mixers/gemma4_attention.h"

#include <cstring>

#include "model/norm.h"
#include "model/rope.h"

namespace sluice::model {

Gemma4AttnWeights bind_gemma4_attention(Binder& b, const std::string& p, const AttentionDesc& d, const HParams& hp) {
  Gemma4AttnWeights w;
  w.geom = hp;
  w.geom.head_dim = w.geom.head_dim_v = d.head_dim ? d.head_dim : hp.head_dim;
  w.geom.n_head_kv = d.n_head_kv ? d.n_head_kv : hp.n_head_kv;
  w.rope = d.rope ? *d.rope : hp.rope;
  const HParams& g = w.geom;
  const uint64_t n_embd = hp.n_embd;
  w.wq = b.matrix(p + "attn_q.weight", n_embd, g.q_dim());
  w.wk = b.matrix(p + "attn_k.weight", n_embd, g.k_dim());
  w.has_v = !d.v_from_k || b.find(p + "attn_v.weight");
  if (w.has_v) w.wv = b.matrix(p + "attn_v.weight", n_embd, g.v_dim());
  w.wo = b.matrix(p + "attn_output.weight", g.q_dim(), n_embd);
  w.q_norm = b.vector(p + "attn_q_norm.weight", g.head_dim);
  w.k_norm = b.vector(p + "attn_k_norm.weight", g.head_dim);
  if (d.rope_freqs) w.freq_factors = b.vector("rope_freqs.weight", w.rope.n_rot / 2);
  return w;
}

void Gemma4Attention::run(const Gemma4AttnWeights& w, const AttentionOptions& opt, const float* xn, int T, int pos0,
                          int layer, KvRows& kv, QuantizedRows& act, ThreadPool& pool, float* out) {
  const HParams& g = w.geom;
  const int hd = static_cast<int>(g.head_dim);
  const float eps = g.rms_eps;
  const int64_t rows_q = static_cast<int64_t>(T) * g.n_head, rows_kv = static_cast<int64_t>(T) * g.n_head_kv;
  q_.resize(static_cast<size_t>(T) * g.q_dim());
  k_.resize(static_cast<size_t>(T) * g.k_dim());
  v_.resize(static_cast<size_t>(T) * g.v_dim());
  matmul_f32(w.wq, xn, T, q_.data(), pool, act);
  matmul_f32(w.wk, xn, T, k_.data(), pool, act);
  if (w.has_v) {
    matmul_f32(w.wv, xn, T, v_.data(), pool, act);
  } else {
    std::memcpy(v_.data(), k_.data(), sizeof(float) * v_.size());  // K = V: the raw k projection
  }
  rms_norm_rows(q_.data(), w.q_norm, rows_q, hd, eps, q_.data());
  rms_norm_rows(k_.data(), w.k_norm, rows_kv, hd, eps, k_.data());
  rms_norm_rows(v_.data(), nullptr, rows_kv, hd, eps, v_.data());
  RopeAngles rope(w.rope, w.freq_factors);
  for (int t = 0; t < T; ++t) {
    rope.set_position(pos0 + t);
    apply_rope(&q_[static_cast<size_t>(t) * g.q_dim()], static_cast<int>(g.n_head), hd, rope, RopeType::Neox);
    apply_rope(&k_[static_cast<size_t>(t) * g.k_dim()], static_cast<int>(g.n_head_kv), hd, rope, RopeType::Neox);
    kv.store(pos0 + t, &k_[static_cast<size_t>(t) * g.k_dim()], &v_[static_cast<size_t>(t) * g.v_dim()]);
  }
  attn_.resize(static_cast<size_t>(T) * g.q_dim());
  attention_.run(q_.data(), T, pos0, layer, kv, g, opt, attn_.data(), pool);
  matmul_f32(w.wo, attn_.data(), T, out, pool, act);
}

}  // namespace sluice::model
