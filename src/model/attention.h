// Causal grouped-query attention over the KV cache, as llama.cpp computes it
// without flash attention: scores = (q . k) * scale, softmax (max-subtracted,
// sum accumulated in double), output = sum_j p_j v_j. Query head h reads KV
// head h / (n_head / n_head_kv). Per layer, optionally (AttentionDesc):
// a sliding window (query i sees keys j with 0 <= i - j < window) and a sink
// logit per head that joins the softmax's max and denominator but has no value.
#pragma once

#include "model/hparams.h"
#include "model/state/kv_rows.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct AttentionOptions {
  uint32_t window = 0;           // 0: full causal attention
  const float* sinks = nullptr;  // n_head sink logits, or null
  float scale = 0.0f;            // score scale; 0: 1/sqrt(head_dim)
  // MLA: the values are the first head_dim_v dims of each cached key row (the
  // cache stores no separate values).
  bool values_in_keys = false;
};

class Attention {
 public:
  // q: n_tokens rows of n_head * head_dim floats (RoPE applied); token t sits at
  // position pos0 + t and sees rows [0, pos0 + t] of `kv` (the layer's KV
  // rows), which must already hold them (Error naming `layer` otherwise). out: n_tokens
  // rows of n_head * head_dim_v floats. Work is split over (token, KV head,
  // subgroup of its query heads) items; each head is computed entirely by one
  // thread with the same operations whatever the split, so results do not
  // depend on the pool size. The heads of an item read the cache together, a
  // block of keys at a time (an F16 cache is converted a block at a time, by
  // the thread that uses it).
  void run(const float* q, int n_tokens, int pos0, int layer, const KvRows& kv, const HParams& hp,
           const AttentionOptions& opt, float* out, ThreadPool& pool);
};

}  // namespace sluice::model
