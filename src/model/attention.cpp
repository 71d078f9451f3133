#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/ops.h"
#include "kernels/quant.h"
#include "util/error.h"
#include "util/prefetch.h"

namespace sluice::model {
namespace {

// Below this many multiply-adds (scores + weighted sum) the pool's wake-up
// costs more than the split saves (see matmul.cpp). Speed only.
constexpr int64_t kMinParallelWork = 256 * 1024;
// Work items per thread to aim for when splitting a KV head's query heads
// into subgroups (decode has only n_head_kv items per token). Speed only.
constexpr int64_t kItemsPerThread = 2;
// Bytes of one KV head's keys (or values) per block: a block is read from
// memory (and converted from F16) once, then used from L2 by every query
// head of the item. Speed only: values do not depend on the block size.
constexpr int64_t kBlockBytes = 64 * 1024;

// How many cached rows ahead of the one being converted to hint into cache:
// a head's slice is a few lines of each row, spaced by the row, which the
// hardware prefetcher does not follow far enough. Speed only.
constexpr int kPrefetchRows = 8;

// Rows [j0, j0 + n) (row indices, KvRows::row) of one head's slice (`dim` elements at offset `off` of
// each cached row of `row_len` elements) as F32: a pointer straight into an F32
// cache, or the slice converted into `scratch` by `f16_to_f32` (exact: F16 ->
// F32 is lossless). Returns the rows and sets `stride` to their row stride.
const float* head_rows(const float* f32, const uint16_t* f16, kernels::DequantizeFn f16_to_f32, int64_t row_len,
                       int64_t off, int64_t dim, int j0, int n, std::vector<float>& scratch, int64_t& stride) {
  if (f32) {
    stride = row_len;
    return f32 + static_cast<int64_t>(j0) * row_len + off;
  }
  scratch.resize(static_cast<size_t>(n) * dim);
  const uint16_t* src = f16 + static_cast<int64_t>(j0) * row_len + off;
  for (int j = 0; j < n; ++j) {
    if (j + kPrefetchRows < n) prefetch_bytes(src + (j + kPrefetchRows) * row_len, sizeof(uint16_t) * dim);
    f16_to_f32(src + j * row_len, &scratch[static_cast<size_t>(j) * dim], dim);
  }
  stride = dim;
  return scratch.data();
}

}  // namespace

void Attention::run(const float* q, int n_tokens, int pos0, int layer, const KvRows& kv, const HParams& hp,
                    const AttentionOptions& opt, float* out, ThreadPool& pool) {
  const int n_keys_max = pos0 + n_tokens;
  if (n_keys_max > kv.n_filled())
    throw Error("attention: layer " + std::to_string(layer) + " reads position " + std::to_string(n_keys_max - 1) +
                " of KV rows filled to " + std::to_string(kv.n_filled()));
  // The oldest key any token reads must still be held (a ring overwrites older rows).
  const int oldest = opt.window > 0 ? std::max(0, pos0 + 1 - static_cast<int>(opt.window)) : 0;
  if (oldest < kv.first_held())
    throw Error("attention: layer " + std::to_string(layer) + " reads position " + std::to_string(oldest) +
                " but its KV rows hold positions from " + std::to_string(kv.first_held()));
  const int capacity = kv.capacity();
  const int64_t hd = static_cast<int64_t>(hp.head_dim);
  const int64_t hdv = static_cast<int64_t>(hp.head_dim_v);
  const int64_t k_dim = static_cast<int64_t>(hp.k_dim());
  const int64_t v_dim = static_cast<int64_t>(hp.v_dim());
  const int n_head = static_cast<int>(hp.n_head);
  const int n_head_kv = static_cast<int>(hp.n_head_kv);
  const int group = n_head / n_head_kv;
  const float scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  // The values' rows: their own, or the key rows (MLA: the first head_dim_v
  // dims of each key row).
  const int64_t v_len = opt.values_in_keys ? k_dim : v_dim;
  const float* k32 = kv.k_f32(0);
  const uint16_t* k16 = kv.k_f16(0);
  const float* v32 = opt.values_in_keys ? k32 : kv.v_f32(0);
  const uint16_t* v16 = opt.values_in_keys ? k16 : kv.v_f16(0);

  // An item is (token, KV head, subgroup of that KV head's query heads): the
  // subgroup's heads share each block of keys and values while it is in
  // cache, instead of each head streaming the whole cache (8x less traffic
  // for Qwen3's 32 / 4 heads). Subgroups exist only to give every thread work
  // when a token has few KV heads (MLA has one).
  const int64_t per_token = static_cast<int64_t>(n_tokens) * n_head_kv;
  const int64_t want = pool.size() > 1 ? kItemsPerThread * pool.size() : 1;
  const int n_sub = static_cast<int>(std::clamp<int64_t>((want + per_token - 1) / per_token, 1, group));
  const int sub = (group + n_sub - 1) / n_sub;  // heads per subgroup (the last may have fewer)
  const int subs = (group + sub - 1) / sub;
  const int64_t key_block = std::max<int64_t>(16, kBlockBytes / (static_cast<int64_t>(sizeof(float)) * std::max(hd, hdv)));

  const kernels::OpsKernels& ops = kernels::ops();
  const kernels::DequantizeFn f16_to_f32 = kernels::kernels_for(GgmlType::F16).dequantize;
  auto body = [&](int64_t b, int64_t e) {
    // Scores of the item's heads, and converted F16 blocks; reused across calls.
    thread_local std::vector<float> p, k_block, v_block;
    if (p.size() < static_cast<size_t>(sub) * n_keys_max) p.resize(static_cast<size_t>(sub) * n_keys_max);
    for (int64_t item = b; item < e; ++item) {
      const int t = static_cast<int>(item / (static_cast<int64_t>(n_head_kv) * subs));
      const int kvh = static_cast<int>(item / subs % n_head_kv);
      const int h0 = kvh * group + static_cast<int>(item % subs) * sub;
      const int h1 = std::min(h0 + sub, (kvh + 1) * group);
      const int pos = pos0 + t;
      const int first = opt.window > 0 ? std::max(0, pos + 1 - static_cast<int>(opt.window)) : 0;
      const int n_keys = pos + 1 - first;
      auto scores = [&](int h) { return p.data() + static_cast<size_t>(h - h0) * n_keys_max; };
      // Scores, a block of keys at a time (each score is one dot_rows value).
      // A block never crosses a ring's wrap (row capacity - 1 to row 0):
      // splitting there changes no value (see the weighted sum below).
      for (int j0 = first, n = 0; j0 <= pos; j0 += n) {
        const int r0 = kv.row(j0);
        n = std::min({static_cast<int>(key_block), pos + 1 - j0, capacity - r0});
        int64_t stride = 0;
        const float* rows = head_rows(k32, k16, f16_to_f32, k_dim, kvh * hd, hd, r0, n, k_block, stride);
        for (int h = h0; h < h1; ++h) {
          const float* qh = q + (static_cast<int64_t>(t) * n_head + h) * hd;
          ops.dot_rows(qh, rows, stride, n, hd, scale, scores(h) + (j0 - first));
        }
      }
      // Softmax per head.
      for (int h = h0; h < h1; ++h) {
        float* ph = scores(h);
        float max_s = -INFINITY;
        for (int j = 0; j < n_keys; ++j) max_s = std::max(max_s, ph[j]);
        if (opt.sinks) max_s = std::max(max_s, opt.sinks[h]);
        double sum = ops.exp_sub_sum(ph, max_s, n_keys);
        if (opt.sinks) sum += static_cast<double>(std::exp(opt.sinks[h] - max_s));
        const float inv = static_cast<float>(1.0 / sum);
        for (int j = 0; j < n_keys; ++j) ph[j] *= inv;
        std::fill_n(out + (static_cast<int64_t>(t) * n_head + h) * hdv, hdv, 0.0f);
      }
      // Weighted sum of the values, a block at a time (weighted_sum_rows
      // accumulates in key order, so blocks give the one-call values).
      for (int j0 = first, n = 0; j0 <= pos; j0 += n) {
        const int r0 = kv.row(j0);
        n = std::min({static_cast<int>(key_block), pos + 1 - j0, capacity - r0});
        int64_t stride = 0;
        const float* rows = head_rows(v32, v16, f16_to_f32, v_len, kvh * hdv, hdv, r0, n, v_block, stride);
        for (int h = h0; h < h1; ++h)
          ops.weighted_sum_rows(scores(h) + (j0 - first), rows, stride, n, hdv,
                                out + (static_cast<int64_t>(t) * n_head + h) * hdv);
      }
    }
  };
  const int64_t items = per_token * subs;
  if (pool.size() > 1 && items > 1 && static_cast<int64_t>(n_tokens) * n_head * n_keys_max * (hd + hdv) >= kMinParallelWork) {
    pool.parallel_for(items, body);
  } else {
    body(0, items);
  }
}

}  // namespace sluice::model
