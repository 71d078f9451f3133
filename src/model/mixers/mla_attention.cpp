#include "model/mixers/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/activation.h"
#include "model/norm.h"

namespace sluice::model {

MlaWeights bind_mla(Binder& b, const std::string& p, const HParams& hp_, bool head_gate) {
  MlaWeights L;
  const MlaParams& m = hp_.mla_params;
  const uint64_t n_embd = hp_.n_embd, n_head = hp_.n_head;
  const uint64_t q_width = n_head * m.qk_head_dim;
  if (m.q_lora_rank > 0) {
    L.wq_a = b.matrix(p + "attn_q_a.weight", n_embd, m.q_lora_rank);
    L.q_a_norm = b.vector(p + "attn_q_a_norm.weight", m.q_lora_rank);
    L.wq_b = b.matrix(p + "attn_q_b.weight", m.q_lora_rank, q_width);
  } else {
    L.wq = b.matrix(p + "attn_q.weight", n_embd, q_width);
  }
  L.wkv_a = b.matrix(p + "attn_kv_a_mqa.weight", n_embd, uint64_t{m.kv_lora_rank} + m.kv_rope_dim);
  L.kv_a_norm = b.vector(p + "attn_kv_a_norm.weight", m.kv_lora_rank);
  L.k_b = b.per_head(p + "attn_k_b.weight", m.nope_dim(), m.kv_lora_rank, n_head);
  L.v_b = b.per_head(p + "attn_v_b.weight", m.kv_lora_rank, m.v_head_dim, n_head);
  L.wo = b.matrix(p + "attn_output.weight", n_head * m.v_head_dim, n_embd);
  if (head_gate) {
    L.head_gate = b.matrix(p + "attn_gate.weight", n_embd, n_head);
    L.has_head_gate = true;
  }
  return L;
}

void MlaAttention::run(const MlaWeights& L, const AttentionOptions& opt, const HParams& hp_, const float* xn, int T,
                       int pos0, int layer, KvRows& kv, RopeAngles& rope_, QuantizedRows& act_, ThreadPool& pool_,
                       float* out) {
  prepare(L, hp_, xn, T, pos0, rope_, act_, pool_);
  const int64_t row = hp_.head_dim;
  for (int t = 0; t < T; ++t) kv.store(pos0 + t, &k_[static_cast<size_t>(t) * row], nullptr);
  // Attention over the latent rows: one shared KV "head", values = the first lora dims.
  attn_.resize(static_cast<size_t>(T) * hp_.n_head * hp_.mla_params.kv_lora_rank);
  attention_.run(v_.data(), T, pos0, layer, kv, hp_, opt, attn_.data(), pool_);
  finish(L, hp_, attn_.data(), T, act_, pool_, out);
}

void MlaAttention::prepare(const MlaWeights& L, const HParams& hp_, const float* xn, int T, int pos0,
                           RopeAngles& rope_, QuantizedRows& act_, ThreadPool& pool_) {
  const MlaParams& m = hp_.mla_params;
  const float eps = hp_.rms_eps;
  const int n_head = static_cast<int>(hp_.n_head);
  const int64_t qk = m.qk_head_dim, nope = m.nope_dim(), rope_dim = m.kv_rope_dim, lora = m.kv_lora_rank;
  const int64_t row = hp_.head_dim;  // lora + rope_dim: the cached key row
  // q: [T][n_head][qk] = [nope | rope] per head.
  q_.resize(static_cast<size_t>(T) * n_head * qk);
  if (m.q_lora_rank > 0) {
    qa_.resize(static_cast<size_t>(T) * m.q_lora_rank);
    matmul_f32(L.wq_a, xn, T, qa_.data(), pool_, act_);
    rms_norm_rows(qa_.data(), L.q_a_norm, T, m.q_lora_rank, eps, qa_.data());
    matmul_f32(L.wq_b, qa_.data(), T, q_.data(), pool_, act_);
  } else {
    matmul_f32(L.wq, xn, T, q_.data(), pool_, act_);
  }
  // kv: [T][lora + rope] -> the rows to cache after norm and RoPE.
  k_.resize(static_cast<size_t>(T) * row);
  matmul_f32(L.wkv_a, xn, T, k_.data(), pool_, act_);
  for (int t = 0; t < T; ++t) {
    float* kr = &k_[static_cast<size_t>(t) * row];
    rms_norm_rows(kr, L.kv_a_norm, 1, lora, eps, kr);
    rope_.set_position(pos0 + t);
    apply_rope(kr + lora, 1, static_cast<int>(rope_dim), rope_, hp_.rope.type);
    apply_rope(&q_[static_cast<size_t>(t) * n_head * qk] + nope, n_head, static_cast<int>(qk), rope_,
               hp_.rope.type);
  }
  if (L.has_head_gate) {  // [T][n_head] sigmoid(attn_gate . xn), applied in finish()
    gate_.resize(static_cast<size_t>(T) * n_head);
    matmul_f32(L.head_gate, xn, T, gate_.data(), pool_, act_);
    for (float& g : gate_) g = sigmoid(g);
  }
  // Absorbed queries: [T][n_head][row] = [k_b_h . q_nope_h | q_pe_h].
  v_.resize(static_cast<size_t>(T) * n_head * row);
  in_.resize(static_cast<size_t>(T) * nope);
  out_.resize(static_cast<size_t>(T) * std::max(lora, static_cast<int64_t>(m.v_head_dim)));
  for (int h = 0; h < n_head; ++h) {
    for (int t = 0; t < T; ++t)
      std::memcpy(&in_[static_cast<size_t>(t) * nope], &q_[(static_cast<size_t>(t) * n_head + h) * qk],
                  sizeof(float) * nope);
    matmul_f32(L.k_b[h], in_.data(), T, out_.data(), pool_, act_);
    for (int t = 0; t < T; ++t) {
      float* dst = &v_[(static_cast<size_t>(t) * n_head + h) * row];
      std::memcpy(dst, &out_[static_cast<size_t>(t) * lora], sizeof(float) * lora);
      std::memcpy(dst + lora, &q_[(static_cast<size_t>(t) * n_head + h) * qk] + nope, sizeof(float) * rope_dim);
    }
  }
}

void MlaAttention::finish(const MlaWeights& L, const HParams& hp_, const float* attn, int T, QuantizedRows& act_,
                          ThreadPool& pool_, float* out) {
  const MlaParams& m = hp_.mla_params;
  const int n_head = static_cast<int>(hp_.n_head);
  const int64_t lora = m.kv_lora_rank;
  // Per head back to values: [T][n_head][v_head_dim], then the output projection.
  const int64_t vh = m.v_head_dim;
  q_.resize(static_cast<size_t>(T) * n_head * vh);  // reused as the heads' values
  in_.resize(static_cast<size_t>(T) * lora);
  out_.resize(static_cast<size_t>(T) * std::max(lora, vh));
  for (int h = 0; h < n_head; ++h) {
    for (int t = 0; t < T; ++t)
      std::memcpy(&in_[static_cast<size_t>(t) * lora], &attn[(static_cast<size_t>(t) * n_head + h) * lora],
                  sizeof(float) * lora);
    matmul_f32(L.v_b[h], in_.data(), T, out_.data(), pool_, act_);
    for (int t = 0; t < T; ++t) {
      float* dst = &q_[(static_cast<size_t>(t) * n_head + h) * vh];
      std::memcpy(dst, &out_[static_cast<size_t>(t) * vh], sizeof(float) * vh);
      if (L.has_head_gate) {
        const float g = gate_[static_cast<size_t>(t) * n_head + h];
        for (int64_t i = 0; i < vh; ++i) dst[i] *= g;
      }
    }
  }
  matmul_f32(L.wo, q_.data(), T, out, pool_, act_);
}

}  // namespace sluice::model
