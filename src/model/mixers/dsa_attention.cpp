#include "model/mixers/dsa_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// Bytes of gathered key rows a chunk of queries may hold at once (the
// attention gathers each query's selected rows, then every head reads them).
// Speed/memory only: values do not depend on it.
constexpr int64_t kGatherBytes = int64_t{32} << 20;

// llama.cpp's LayerNorm (ggml_norm, sums in double) with eps, then * w + b.
void layer_norm(float* x, const float* w, const float* b, int64_t n, float eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] -= mean;
    sum2 += static_cast<double>(x[i]) * x[i];
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * scale * w[i] + b[i];
}

// `n` values at offset `off` of cached row `pos` as F32: a pointer into an F32
// cache, or converted (exactly) into `scratch` from an F16 one.
const float* cached(const KvRows& kv, int pos, int64_t off, int64_t n, float* scratch) {
  const int64_t at = static_cast<int64_t>(pos) * kv.k_dim() + off;
  if (const float* f = kv.k_f32(0)) return f + at;
  kernels::kernels_for(GgmlType::F16).dequantize(kv.k_f16(0) + at, scratch, n);
  return scratch;
}

}  // namespace

DsaIndexerWeights bind_dsa_indexer(Binder& b, const std::string& p, const HParams& hp) {
  DsaIndexerWeights w;
  const uint64_t D = hp.dsa.head_dim, H = hp.dsa.n_head;
  w.wq_b = b.matrix(p + "indexer.attn_q_b.weight", hp.mla_params.q_lora_rank, H * D);
  w.wk = b.matrix(p + "indexer.attn_k.weight", hp.n_embd, D);
  w.proj = b.matrix(p + "indexer.proj.weight", hp.n_embd, H);
  w.k_norm = b.vector(p + "indexer.k_norm.weight", D);
  w.k_norm_bias = b.vector(p + "indexer.k_norm.bias", D);
  return w;
}

void DsaAttention::run(const MlaWeights& L, const DsaIndexerWeights* ix, DsaIndexer kind, float scale,
                       const HParams& hp, const float* xn, int T, int pos0, int row0, int layer, KvRows& kv,
                       RopeAngles& rope, QuantizedRows& act, ThreadPool& pool, float* out) {
  const int64_t row = hp.head_dim;  // the latent row: kv_lora_rank + rope dims
  const int k = static_cast<int>(hp.dsa.top_k);
  if (sel_n_.size() < static_cast<size_t>(row0 + T)) {
    sel_n_.resize(static_cast<size_t>(row0 + T), 0);
    sel_.resize(static_cast<size_t>(row0 + T) * k);
  }
  mla_.prepare(L, hp, xn, T, pos0, rope, act, pool);
  if (kind == DsaIndexer::Full) {
    select(*ix, hp, xn, T, pos0, row0, layer, kv, rope, act, pool);
  } else {
    for (int t = 0; t < T; ++t) {
      kv.store(pos0 + t, mla_.latent_rows() + static_cast<int64_t>(t) * row, nullptr);
      // A Shared layer right after a Full one sees the same rows: their
      // selection is still in sel_ (layer 0 is Full: describe_glm_dsa checks).
      if (sel_n_[static_cast<size_t>(row0 + t)] == 0)
        throw Error("dsa attention: layer " + std::to_string(layer) + " has no indexer selection to share");
    }
  }
  attend(hp, scale, T, row0, kv, pool);
  mla_.finish(L, hp, attn_.data(), T, act, pool, out);
}

void DsaAttention::select(const DsaIndexerWeights& ix, const HParams& hp, const float* xn, int T, int pos0, int row0,
                          int layer, KvRows& kv, RopeAngles& rope, QuantizedRows& act, ThreadPool& pool) {
  const int64_t D = hp.dsa.head_dim, H = hp.dsa.n_head, row = hp.head_dim;
  const int k = static_cast<int>(hp.dsa.top_k);
  iq_.resize(static_cast<size_t>(T) * H * D);
  ik_.resize(static_cast<size_t>(T) * D);
  w_.resize(static_cast<size_t>(T) * H);
  matmul_f32(ix.wq_b, mla_.q_lora(), T, iq_.data(), pool, act);
  matmul_f32(ix.wk, xn, T, ik_.data(), pool, act);
  matmul_f32(ix.proj, xn, T, w_.data(), pool, act);
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(D * H));
  // The rows to cache: [latent | indexer key].
  rows_.resize(static_cast<size_t>(T) * (row + D));
  for (int t = 0; t < T; ++t) {
    float* kt = &ik_[static_cast<size_t>(t) * D];
    layer_norm(kt, ix.k_norm, ix.k_norm_bias, D, 0.0f);
    rope.set_position(pos0 + t);
    // RoPE on the first n_rot dims of each head: apply_rope's head layout.
    apply_rope(&iq_[static_cast<size_t>(t) * H * D], static_cast<int>(H), static_cast<int>(D), rope, RopeType::Norm);
    apply_rope(kt, 1, static_cast<int>(D), rope, RopeType::Norm);
    for (int64_t g = 0; g < H; ++g) w_[static_cast<size_t>(t) * H + g] *= w_scale;
    float* r = &rows_[static_cast<size_t>(t) * (row + D)];
    std::memcpy(r, mla_.latent_rows() + static_cast<int64_t>(t) * row, sizeof(float) * row);
    std::memcpy(r + row, kt, sizeof(float) * D);
    kv.store(pos0 + t, r, nullptr);
  }

  // Scores, then the top-k. Each score is one function of (t, j) computed by
  // one thread, so however the work is split (by query in a prompt, by key
  // within the query at decode) no value changes.
  const kernels::OpsKernels& ops = kernels::ops();
  auto score_keys = [&](int64_t t, int64_t j0, int64_t j1, float* score) {
    thread_local std::vector<float> key;
    key.resize(static_cast<size_t>(D));
    const float* q = &iq_[static_cast<size_t>(t) * H * D];
    const float* w = &w_[static_cast<size_t>(t) * H];
    for (int64_t j = j0; j < j1; ++j) {
      const float* kj = cached(kv, static_cast<int>(j), row, D, key.data());
      float s = 0.0f;
      for (int64_t g = 0; g < H; ++g) s += w[g] * std::max(0.0f, ops.dot(q + g * D, kj, D));
      score[j] = std::isnan(s) ? -INFINITY : s;
    }
  };
  auto top_k = [&](int64_t t, const float* score) {
    int32_t* sel = &sel_[static_cast<size_t>(row0 + t) * k];
    const int n_vis = pos0 + static_cast<int>(t) + 1;
    if (n_vis <= k) {  // every visible key: the layer is dense causal MLA here
      for (int j = 0; j < n_vis; ++j) sel[j] = j;
      sel_n_[static_cast<size_t>(row0 + t)] = n_vis;
      return;
    }
    thread_local std::vector<int32_t> idx;
    idx.resize(static_cast<size_t>(n_vis));
    for (int j = 0; j < n_vis; ++j) idx[static_cast<size_t>(j)] = j;
    // Largest score first; equal scores: the lower position (a strict order,
    // so the selection is one definite set).
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t c) {
      return score[a] > score[c] || (score[a] == score[c] && a < c);
    });
    std::sort(idx.begin(), idx.begin() + k);
    std::copy_n(idx.begin(), k, sel);
    sel_n_[static_cast<size_t>(row0 + t)] = k;
  };
  if (pool.size() <= 1 || T >= pool.size()) {
    auto body = [&](int64_t b, int64_t e) {
      thread_local std::vector<float> score;
      for (int64_t t = b; t < e; ++t) {
        const int n_vis = pos0 + static_cast<int>(t) + 1;
        if (n_vis > k) {
          score.resize(static_cast<size_t>(n_vis));
          score_keys(t, 0, n_vis, score.data());
        }
        top_k(t, score.data());
      }
    };
    if (pool.size() > 1 && T > 1)
      pool.parallel_for(T, body);
    else
      body(0, T);
  } else {
    for (int64_t t = 0; t < T; ++t) {
      const int n_vis = pos0 + static_cast<int>(t) + 1;
      if (n_vis > k) {
        score_.resize(static_cast<size_t>(n_vis));
        pool.parallel_for(n_vis, [&](int64_t b, int64_t e) { score_keys(t, b, e, score_.data()); }, 64);
      }
      top_k(t, score_.data());
    }
  }
  if (observer_)
    for (int t = 0; t < T; ++t)
      observer_(layer, pos0 + t,
                std::span<const int32_t>(&sel_[static_cast<size_t>(row0 + t) * k], sel_n_[static_cast<size_t>(row0 + t)]));
}

void DsaAttention::attend(const HParams& hp, float scale, int T, int row0, const KvRows& kv, ThreadPool& pool) {
  const int64_t row = hp.head_dim, lora = hp.mla_params.kv_lora_rank;
  const int n_head = static_cast<int>(hp.n_head);
  const int k = static_cast<int>(hp.dsa.top_k);
  const kernels::OpsKernels& ops = kernels::ops();
  const float* q_all = mla_.queries();  // [T][n_head][row]
  attn_.resize(static_cast<size_t>(T) * n_head * lora);
  const int64_t per_query = static_cast<int64_t>(k) * row * static_cast<int64_t>(sizeof(float));
  const int chunk = static_cast<int>(std::clamp<int64_t>(kGatherBytes / std::max<int64_t>(per_query, 1), 1, T));
  gathered_.resize(static_cast<size_t>(chunk) * k * row);
  for (int t0 = 0; t0 < T; t0 += chunk) {
    const int nt = std::min(chunk, T - t0);
    // Gather each query's selected latent rows (ascending positions).
    for (int t = 0; t < nt; ++t) {
      const int32_t* sel = &sel_[static_cast<size_t>(row0 + t0 + t) * k];
      const int n = sel_n_[static_cast<size_t>(row0 + t0 + t)];
      float* g = &gathered_[static_cast<size_t>(t) * k * row];
      for (int i = 0; i < n; ++i) {
        float* dst = g + static_cast<int64_t>(i) * row;
        const float* src = cached(kv, sel[i], 0, row, dst);
        if (src != dst) std::memcpy(dst, src, sizeof(float) * row);
      }
    }
    // One (query, head) per item: scores, softmax, weighted sum of the latents.
    auto body = [&](int64_t b, int64_t e) {
      thread_local std::vector<float> p;
      p.resize(static_cast<size_t>(k));
      for (int64_t item = b; item < e; ++item) {
        const int t = static_cast<int>(item / n_head), h = static_cast<int>(item % n_head);
        const int n = sel_n_[static_cast<size_t>(row0 + t0 + t)];
        const float* g = &gathered_[static_cast<size_t>(t) * k * row];
        const float* q = q_all + (static_cast<int64_t>(t0 + t) * n_head + h) * row;
        ops.dot_rows(q, g, row, n, row, scale, p.data());
        float max_s = -INFINITY;
        for (int j = 0; j < n; ++j) max_s = std::max(max_s, p[static_cast<size_t>(j)]);
        const double sum = ops.exp_sub_sum(p.data(), max_s, n);
        const float inv = static_cast<float>(1.0 / sum);
        for (int j = 0; j < n; ++j) p[static_cast<size_t>(j)] *= inv;
        float* o = &attn_[(static_cast<size_t>(t0 + t) * n_head + h) * lora];
        std::fill_n(o, lora, 0.0f);
        ops.weighted_sum_rows(p.data(), g, row, n, lora, o);
      }
    };
    const int64_t items = static_cast<int64_t>(nt) * n_head;
    if (pool.size() > 1 && items > 1)
      pool.parallel_for(items, body);
    else
      body(0, items);
  }
}

}  // namespace sluice::model
