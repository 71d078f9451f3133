// Causal grouped-query attention over the KV cache, as llama.cpp computes it
// without flash attention: scores = (q . k) * scale, softmax (max-subtracted,
// sum accumulated in double), output = sum_j p_j v_j. Query head h reads KV
// head h / (n_head / n_head_kv).
#pragma once

#include <vector>

#include "model/hparams.h"
#include "model/kv_cache.h"
#include "model/thread_pool.h"

namespace sluice::model {

class Attention {
 public:
  // q: n_tokens rows of n_head * head_dim floats (RoPE applied); token t sits at
  // position pos0 + t and sees cache positions [0, pos0 + t]. The cache must
  // already hold those positions for `layer`. out: n_tokens rows of
  // n_head * head_dim_v floats. Work is split over (token, head) pairs, each
  // computed entirely by one thread, so results do not depend on the pool size.
  void run(const float* q, int n_tokens, int pos0, int layer, const KvCache& kv, const HParams& hp, float* out,
           ThreadPool& pool);

 private:
  std::vector<float> k_scratch_, v_scratch_;  // F16 cache: keys/values of the layer as F32
};

}  // namespace sluice::model
