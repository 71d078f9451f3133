// The grouped-query attention mixer (AttentionKind::Gqa): q/k/v projections
// with optional biases and per-head q/k RMSNorm, RoPE, the new keys and values
// appended to the layer's KV rows, causal attention over them (sliding window
// and sinks as AttentionOptions say), and the output projection. With an
// output gate (Qwen3.5's gated attention) attn_q gives per head [query | gate]
// and each head's output is multiplied by sigmoid(gate) before attn_output.
// State: one KvRows per layer (state_spec.h), rolled back exactly.
#pragma once

#include <string>
#include <vector>

#include "model/arch.h"
#include "model/attention.h"
#include "model/binder.h"
#include "model/matmul.h"
#include "model/rope.h"
#include "model/state/kv_rows.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct GqaWeights {
  WeightMatrix wq, wk, wv, wo;
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // optional biases
  const float* q_norm = nullptr;  // optional per-head RMSNorm weights {head_dim}
  const float* k_norm = nullptr;
  bool output_gate = false;  // AttentionDesc::output_gate: wq yields 2 head_dim rows per head
};

// Binds `prefix`attn_{q,k,v,output}.weight and the optional inputs `d` declares.
GqaWeights bind_gqa(Binder& b, const std::string& prefix, const AttentionDesc& d, const HParams& hp);

class GqaAttention {
 public:
  // xn: T normed rows at positions pos0..; writes T rows of the output
  // projection (before its bias) to `out`. The new rows go into `kv`, which
  // must hold [0, pos0 + T) as filled (ModelState::begin_append).
  void run(const GqaWeights& w, const AttentionOptions& opt, const HParams& hp, const float* xn, int T, int pos0,
           int layer, KvRows& kv, RopeAngles& rope, QuantizedRows& act, ThreadPool& pool, float* out);

 private:
  std::vector<float> q_, k_, v_, attn_;
  std::vector<float> q_gate_;  // gated: [T][n_head][query hd | gate hd] as attn_q gives it
  Attention attention_;
};

}  // namespace sluice::model
