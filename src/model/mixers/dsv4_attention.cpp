#include "model/mixers/dsv4_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "model/norm.h"
#include "model/rope.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// RoPE (NORM pairs) on the last n_rot dims of each of n_heads heads of hd floats.
void rope_tail(float* x, int n_heads, int hd, const RopeAngles& a) {
  const int nope = hd - a.n_rot();
  for (int h = 0; h < n_heads; ++h)
    apply_rope(x + static_cast<int64_t>(h) * hd + nope, 1, a.n_rot(), a, RopeType::Norm);
}

// The inverse rotation (ggml_rope_ext_back) on the last n_rot dims of each head.
void unrope_tail(float* x, int n_heads, int hd, const RopeAngles& a) {
  const int nope = hd - a.n_rot();
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * hd + nope;
    for (int j = 0; j < a.n_rot() / 2; ++j) {
      const float c = a.cos()[j], s = a.sin()[j];
      const float x0 = v[2 * j], x1 = v[2 * j + 1];
      v[2 * j] = x0 * c + x1 * s;
      v[2 * j + 1] = -x0 * s + x1 * c;
    }
  }
}

RopeParams layer_rope(const AttentionDesc& d, const HParams& hp) {
  return d.compress_ratio != 0 ? hp.dsv4.compress_rope : hp.rope;
}

// Row `pos` of kv as F32 (a pointer into the rows, or a copy into buf).
const float* row_at(const KvRows& kv, int pos, std::vector<float>& buf) {
  if (kv.type() == KvType::F32) return kv.k_f32(kv.row(pos));
  buf.resize(static_cast<size_t>(kv.k_dim()));
  kv.load_k(pos, buf.data());
  return buf.data();
}

// One compressed entry of width n: the per-channel softmax pooling of block b
// (ratio R) from the rows' compressor kv (offset kv_off) and scores (sc_off),
// each 2n wide when overlapping, else n. Overlapping (R = 4): the previous
// block's tokens in channels [0, n), the block's own in [n, 2n) (block 0: its
// own only); else the block's own tokens in [0, n).
// Then RMSNorm * norm and RoPE at position bR.
void compress_block(const KvRows& kv, int b, int R, int kv_off, int sc_off, int n, bool overlap,
                    const float* norm, float eps, RopeAngles& rope, float* out) {
  std::vector<const float*> rows_kv, rows_sc;
  std::vector<int> half;  // which half of the channels a token contributes
  std::vector<std::vector<float>> bufs;
  const int first = overlap && b > 0 ? (b - 1) * R : b * R;
  const int n_tok = (b + 1) * R - first;
  bufs.resize(static_cast<size_t>(n_tok));
  for (int k = 0; k < n_tok; ++k) {
    const int j = first + k;
    const float* r = row_at(kv, j, bufs[static_cast<size_t>(k)]);
    rows_kv.push_back(r + kv_off);
    rows_sc.push_back(r + sc_off);
    half.push_back(overlap && j < b * R ? 0 : (overlap ? 1 : 0));
  }
  std::vector<float> p(static_cast<size_t>(n_tok));
  for (int ch = 0; ch < n; ++ch) {
    float mx = -INFINITY;
    for (int k = 0; k < n_tok; ++k) mx = std::max(mx, rows_sc[k][half[k] * n + ch]);
    double sum = 0.0;
    for (int k = 0; k < n_tok; ++k) {
      p[k] = std::exp(rows_sc[k][half[k] * n + ch] - mx);
      sum += p[k];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float acc = 0.0f;
    for (int k = 0; k < n_tok; ++k) acc += p[k] * inv * rows_kv[k][half[k] * n + ch];
    out[ch] = acc;
  }
  rms_norm(out, norm, n, eps, out);
  rope.set_position(static_cast<int64_t>(b) * R);
  rope_tail(out, 1, n, rope);
}

}  // namespace

Dsv4RowLayout dsv4_row_layout(uint32_t ratio, const HParams& hp) {
  Dsv4RowLayout l;
  l.hd = static_cast<int>(hp.head_dim);
  int at = l.hd;  // kv at 0
  if (ratio != 0) {
    l.c = (ratio == 4 ? 2 : 1) * l.hd;
    l.ckv = at, at += l.c;
    l.csc = at, at += l.c;
    l.block_width = l.hd;
  }
  if (ratio == 4) {
    l.d = static_cast<int>(hp.dsa.head_dim);
    l.ikv = at, at += 2 * l.d;
    l.isc = at, at += 2 * l.d;
    l.block_width += l.d;
  }
  l.total = at;
  return l;
}

int dsv4_lookback(const AttentionDesc& d) {
  if (d.window == 0) return 0;
  const int64_t R = d.compress_ratio, pooled = R == 4 ? 2 * R : R;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(d.window, pooled), INT32_MAX));
}

Dsv4AttnWeights bind_dsv4_attention(Binder& b, const std::string& p, const AttentionDesc& d,
                                    const HParams& hp) {
  const uint64_t n_embd = hp.n_embd, hd = hp.head_dim, nh = hp.n_head, ql = hp.dsv4.q_lora_rank;
  const uint64_t G = hp.dsv4.o_groups, r = hp.dsv4.o_lora_rank;
  Dsv4AttnWeights w;
  w.q_a = b.matrix(p + "attn_q_a.weight", n_embd, ql);
  w.q_a_norm = b.vector(p + "attn_q_a_norm.weight", ql);
  w.q_b = b.matrix(p + "attn_q_b.weight", ql, nh * hd);
  w.kv = b.matrix(p + "attn_kv.weight", n_embd, hd);
  w.kv_norm = b.vector(p + "attn_kv_a_norm.weight", hd);
  w.sinks = b.vector(p + "attn_sinks.weight", nh);
  w.o_a = b.row_blocks(p + "attn_output_a.weight", nh * hd / G, r, G);
  w.o_b = b.matrix(p + "attn_output_b.weight", G * r, n_embd);
  const uint32_t R = d.compress_ratio;
  if (R != 0) {
    const uint64_t c = (R == 4 ? 2 : 1) * hd;
    w.c_kv = b.matrix(p + "attn_compressor_kv.weight", n_embd, c);
    w.c_gate = b.matrix(p + "attn_compressor_gate.weight", n_embd, c);
    w.c_ape = b.f32(p + "attn_compressor_ape.weight", {c, R});
    w.c_norm = b.vector(p + "attn_compressor_norm.weight", hd);
  }
  if (R == 4) {
    const uint64_t D = hp.dsa.head_dim, H = hp.dsa.n_head;
    w.i_q_b = b.matrix(p + "indexer.attn_q_b.weight", ql, H * D);
    w.i_proj = b.matrix(p + "indexer.proj.weight", n_embd, H);
    w.i_kv = b.matrix(p + "indexer_compressor_kv.weight", n_embd, 2 * D);
    w.i_gate = b.matrix(p + "indexer_compressor_gate.weight", n_embd, 2 * D);
    w.i_ape = b.f32(p + "indexer_compressor_ape.weight", {2 * D, 4});
    w.i_norm = b.vector(p + "indexer_compressor_norm.weight", D);
  }
  return w;
}

void Dsv4Attention::run(const Dsv4AttnWeights& w, const AttentionDesc& d, const HParams& hp,
                        const float* h, int T, int pos0, int layer, KvRows& kv, KvRows* blocks,
                        QuantizedRows& act, ThreadPool& pool, float* out) {
  const int hd = static_cast<int>(hp.head_dim), nh = static_cast<int>(hp.n_head);
  const int ql = static_cast<int>(hp.dsv4.q_lora_rank);
  const int R = static_cast<int>(d.compress_ratio);
  const float eps = hp.rms_eps;
  const Dsv4RowLayout L = dsv4_row_layout(d.compress_ratio, hp);
  if (kv.k_dim() != L.total || (R != 0 && (!blocks || blocks->k_dim() != L.block_width)))
    throw Error("internal: deepseek4 layer " + std::to_string(layer) + " rows hold " +
                std::to_string(kv.k_dim()) + " values, expected " + std::to_string(L.total) +
                (R != 0 ? " and blocks of " + std::to_string(L.block_width) : std::string()));
  RopeAngles rope(layer_rope(d, hp));
  RopeAngles crope(hp.dsv4.compress_rope);

  // Queries and the raw kv.
  qr_.resize(static_cast<size_t>(T) * ql);
  matmul_f32(w.q_a, h, T, qr_.data(), pool, act);
  rms_norm_rows(qr_.data(), w.q_a_norm, T, ql, eps, qr_.data());
  q_.resize(static_cast<size_t>(T) * nh * hd);
  matmul_f32(w.q_b, qr_.data(), T, q_.data(), pool, act);
  rms_norm_rows(q_.data(), nullptr, static_cast<int64_t>(T) * nh, hd, eps, q_.data());
  kvr_.resize(static_cast<size_t>(T) * hd);
  matmul_f32(w.kv, h, T, kvr_.data(), pool, act);
  rms_norm_rows(kvr_.data(), w.kv_norm, T, hd, eps, kvr_.data());
  for (int t = 0; t < T; ++t) {
    rope.set_position(pos0 + t);
    rope_tail(&q_[static_cast<size_t>(t) * nh * hd], nh, hd, rope);
    rope_tail(&kvr_[static_cast<size_t>(t) * hd], 1, hd, rope);
  }
  // The compressors' per-token inputs; the indexer's queries and weights.
  const int D = L.d, H = static_cast<int>(hp.dsa.n_head);
  if (R != 0) {
    ckv_.resize(static_cast<size_t>(T) * L.c);
    csc_.resize(static_cast<size_t>(T) * L.c);
    matmul_f32(w.c_kv, h, T, ckv_.data(), pool, act);
    matmul_f32(w.c_gate, h, T, csc_.data(), pool, act);
    for (int t = 0; t < T; ++t) {
      const float* ape = w.c_ape + static_cast<int64_t>((pos0 + t) % R) * L.c;
      for (int i = 0; i < L.c; ++i) csc_[static_cast<size_t>(t) * L.c + i] += ape[i];
    }
  }
  if (R == 4) {
    ikv_.resize(static_cast<size_t>(T) * 2 * D);
    isc_.resize(static_cast<size_t>(T) * 2 * D);
    matmul_f32(w.i_kv, h, T, ikv_.data(), pool, act);
    matmul_f32(w.i_gate, h, T, isc_.data(), pool, act);
    for (int t = 0; t < T; ++t) {
      const float* ape = w.i_ape + static_cast<int64_t>((pos0 + t) % 4) * 2 * D;
      for (int i = 0; i < 2 * D; ++i) isc_[static_cast<size_t>(t) * 2 * D + i] += ape[i];
    }
    iq_.resize(static_cast<size_t>(T) * H * D);
    matmul_f32(w.i_q_b, qr_.data(), T, iq_.data(), pool, act);
    iw_.resize(static_cast<size_t>(T) * H);
    matmul_f32(w.i_proj, h, T, iw_.data(), pool, act);
    const float s = 1.0f / std::sqrt(static_cast<float>(D) * static_cast<float>(H));
    for (float& v : iw_) v *= s;
    for (int t = 0; t < T; ++t) {
      crope.set_position(pos0 + t);
      rope_tail(&iq_[static_cast<size_t>(t) * H * D], H, D, crope);
    }
  }

  // Store the rows, then each block completed by this append.
  row_.assign(static_cast<size_t>(L.total), 0.0f);
  for (int t = 0; t < T; ++t) {
    std::fill(row_.begin(), row_.end(), 0.0f);
    std::copy_n(&kvr_[static_cast<size_t>(t) * hd], hd, &row_[L.kv]);
    if (R != 0) {
      std::copy_n(&ckv_[static_cast<size_t>(t) * L.c], L.c, &row_[L.ckv]);
      std::copy_n(&csc_[static_cast<size_t>(t) * L.c], L.c, &row_[L.csc]);
    }
    if (R == 4) {
      std::copy_n(&ikv_[static_cast<size_t>(t) * 2 * D], 2 * D, &row_[L.ikv]);
      std::copy_n(&isc_[static_cast<size_t>(t) * 2 * D], 2 * D, &row_[L.isc]);
    }
    kv.store(pos0 + t, row_.data(), nullptr);
  }
  if (R != 0) {
    std::vector<float> entry(static_cast<size_t>(L.block_width));
    for (int t = 0; t < T; ++t) {
      const int pos = pos0 + t;
      if ((pos + 1) % R != 0) continue;
      const int b = (pos + 1) / R - 1;
      compress_block(kv, b, R, L.ckv, L.csc, hd, R == 4, w.c_norm, eps, crope, entry.data());
      if (R == 4) compress_block(kv, b, R, L.ikv, L.isc, D, true, w.i_norm, eps, crope, entry.data() + hd);
      blocks->store(b, entry.data(), nullptr);
    }
  }

  // Attention: per token, the window's raw keys and the visible (selected) blocks.
  const int window = static_cast<int>(d.window);
  const int top_k = static_cast<int>(hp.dsa.top_k);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  o_.assign(static_cast<size_t>(T) * nh * hd, 0.0f);
  std::vector<const float*> keys;
  std::vector<std::vector<float>> bufs;
  std::vector<float> sc, score;
  std::vector<int> chosen, order;
  for (int t = 0; t < T; ++t) {
    const int i = pos0 + t;
    keys.clear();
    size_t nb = 0;
    auto key_at = [&](const KvRows& rows, int pos) {
      if (bufs.size() <= nb) bufs.resize(nb + 1);
      keys.push_back(row_at(rows, pos, bufs[nb++]));  // the raw kv and the compressed entry are at 0
    };
    for (int j = std::max(0, window > 0 ? i - window + 1 : 0); j <= i; ++j) key_at(kv, j);
    chosen.clear();
    if (R != 0) {
      const int visible = (i + 1) / R;
      for (int b = 0; b < visible; ++b) chosen.push_back(b);
      if (R == 4 && visible > top_k) {
        // The lightning indexer: score(i, b) = sum_g w_g max(0, iq_g . ik_b).
        score.assign(static_cast<size_t>(visible), 0.0f);
        std::vector<float> ib;
        for (int b = 0; b < visible; ++b) {
          const float* ik = row_at(*blocks, b, ib) + hd;
          float s = 0.0f;
          for (int g = 0; g < H; ++g) {
            const float* q = &iq_[(static_cast<size_t>(t) * H + g) * D];
            float dot = 0.0f;
            for (int e = 0; e < D; ++e) dot += q[e] * ik[e];
            s += iw_[static_cast<size_t>(t) * H + g] * std::max(0.0f, dot);
          }
          score[b] = s;
        }
        order.resize(static_cast<size_t>(visible));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int a, int c) { return score[a] > score[c]; });
        chosen.assign(order.begin(), order.begin() + top_k);
        std::sort(chosen.begin(), chosen.end());
      }
      if (R == 4 && observer_) observer_(layer, i, chosen);
      for (int b : chosen) key_at(*blocks, b);
    }
    const int nk = static_cast<int>(keys.size());
    sc.resize(static_cast<size_t>(nk));
    for (int g = 0; g < nh; ++g) {
      const float* q = &q_[(static_cast<size_t>(t) * nh + g) * hd];
      float mx = w.sinks[g];
      for (int k = 0; k < nk; ++k) {
        float dot = 0.0f;
        for (int e = 0; e < hd; ++e) dot += q[e] * keys[k][e];
        sc[k] = dot * scale;
        mx = std::max(mx, sc[k]);
      }
      double sum = std::exp(static_cast<double>(w.sinks[g] - mx));
      for (int k = 0; k < nk; ++k) {
        sc[k] = std::exp(sc[k] - mx);
        sum += sc[k];
      }
      const float inv = static_cast<float>(1.0 / sum);
      float* o = &o_[(static_cast<size_t>(t) * nh + g) * hd];
      for (int k = 0; k < nk; ++k) {
        const float p = sc[k] * inv;
        for (int e = 0; e < hd; ++e) o[e] += p * keys[k][e];
      }
    }
    rope.set_position(i);
    unrope_tail(&o_[static_cast<size_t>(t) * nh * hd], nh, hd, rope);
  }

  // Grouped low-rank output: group g's heads through o_a[g], then o_b.
  const int G = static_cast<int>(hp.dsv4.o_groups), r = static_cast<int>(hp.dsv4.o_lora_rank);
  const int gw = nh * hd / G;
  oa_.resize(static_cast<size_t>(T) * G * r);
  og_.resize(static_cast<size_t>(T) * gw);
  std::vector<float> part(static_cast<size_t>(T) * r);
  for (int g = 0; g < G; ++g) {
    for (int t = 0; t < T; ++t)
      std::copy_n(&o_[static_cast<size_t>(t) * nh * hd + g * gw], gw,
                  &og_[static_cast<size_t>(t) * gw]);
    matmul_f32(w.o_a[g], og_.data(), T, part.data(), pool, act);
    for (int t = 0; t < T; ++t)
      std::copy_n(&part[static_cast<size_t>(t) * r], r,
                  &oa_[static_cast<size_t>(t) * G * r + g * r]);
  }
  matmul_f32(w.o_b, oa_.data(), T, out, pool, act);
}

}  // namespace sluice::model
