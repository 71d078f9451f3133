#include "model/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace sluice::model {
namespace {

// Below this many multiply-adds (scores + weighted sum) the pool's wake-up
// costs more than the split saves (see matmul.cpp). Speed only.
constexpr int64_t kMinParallelWork = 256 * 1024;

}  // namespace

void Attention::run(const float* q, int n_tokens, int pos0, int layer, const KvCache& kv, const HParams& hp,
                    const AttentionOptions& opt, float* out, ThreadPool& pool) {
  const int n_keys_max = pos0 + n_tokens;
  const int hd = static_cast<int>(hp.head_dim);
  const int hdv = static_cast<int>(hp.head_dim_v);
  const int k_dim = static_cast<int>(hp.k_dim());
  const int v_dim = static_cast<int>(hp.v_dim());
  const int n_head = static_cast<int>(hp.n_head);
  const int group = static_cast<int>(hp.n_head / hp.n_head_kv);
  const float scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  // Row stride of the values: their own rows, or the key rows (MLA).
  const int v_stride = opt.values_in_keys ? k_dim : v_dim;

  const float* keys = nullptr;
  const float* values = nullptr;
  if (kv.type() == KvType::F32) {
    keys = kv.k_f32(layer, 0);
    values = opt.values_in_keys ? keys : kv.v_f32(layer, 0);
  } else {
    k_scratch_.resize(static_cast<size_t>(n_keys_max) * k_dim);
    if (!opt.values_in_keys) v_scratch_.resize(static_cast<size_t>(n_keys_max) * v_dim);
    // Only the keys some query of this call can see (a window starts late).
    const int j0 = opt.window > 0 ? std::max(0, pos0 + 1 - static_cast<int>(opt.window)) : 0;
    for (int j = j0; j < n_keys_max; ++j) {
      kv.load_k(layer, j, &k_scratch_[static_cast<size_t>(j) * k_dim]);
      if (!opt.values_in_keys) kv.load_v(layer, j, &v_scratch_[static_cast<size_t>(j) * v_dim]);
    }
    keys = k_scratch_.data();
    values = opt.values_in_keys ? keys : v_scratch_.data();
  }

  const kernels::OpsKernels& ops = kernels::ops();
  auto body = [&](int64_t b, int64_t e) {
    thread_local std::vector<float> p;  // scores; reused across calls (no per-chunk allocation)
    if (p.size() < static_cast<size_t>(n_keys_max)) p.resize(static_cast<size_t>(n_keys_max));
    for (int64_t item = b; item < e; ++item) {
      const int t = static_cast<int>(item / n_head);
      const int h = static_cast<int>(item % n_head);
      const int kvh = h / group;
      const int pos = pos0 + t;
      const int first = opt.window > 0 ? std::max(0, pos + 1 - static_cast<int>(opt.window)) : 0;
      const int n_keys = pos + 1 - first;
      const float* qh = q + static_cast<int64_t>(t) * n_head * hd + static_cast<int64_t>(h) * hd;
      ops.dot_rows(qh, keys + static_cast<int64_t>(first) * k_dim + static_cast<int64_t>(kvh) * hd, k_dim, n_keys,
                   hd, scale, p.data());
      float max_s = -INFINITY;
      for (int j = 0; j < n_keys; ++j) max_s = std::max(max_s, p[j]);
      if (opt.sinks) max_s = std::max(max_s, opt.sinks[h]);
      double sum = ops.exp_sub_sum(p.data(), max_s, n_keys);
      if (opt.sinks) sum += static_cast<double>(std::exp(opt.sinks[h] - max_s));
      const float inv = static_cast<float>(1.0 / sum);
      for (int j = 0; j < n_keys; ++j) p[j] *= inv;
      float* oh = out + static_cast<int64_t>(t) * n_head * hdv + static_cast<int64_t>(h) * hdv;
      ops.weighted_sum_rows(p.data(), values + static_cast<int64_t>(first) * v_stride + static_cast<int64_t>(kvh) * hdv,
                            v_stride, n_keys, hdv, oh);
    }
  };
  const int64_t items = static_cast<int64_t>(n_tokens) * n_head;
  if (pool.size() > 1 && items > 1 && items * n_keys_max * (hd + hdv) >= kMinParallelWork) {
    pool.parallel_for(items, body);
  } else {
    body(0, items);
  }
}

}  // namespace sluice::model
