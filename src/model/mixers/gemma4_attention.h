// Gemma 4's attention mixer (llama.cpp's src/models/gemma4.cpp): the grouped-
// query attention of a layer with its own geometry (AttentionDesc::head_dim,
// n_head_kv, rope): q and k get a per-head RMSNorm with attn_q_norm /
// attn_k_norm, the values a per-head RMSNorm without weight; on a layer
// without attn_v.weight (v_from_k, attention_k_eq_v) the values are the raw
// attn_k projection (before k's norm). NEOX RoPE on q and k, optionally with
// per-pair frequency factors (rope_freqs: "proportional" RoPE); attention
// scale and window from AttentionOptions. State: the layer's KvRows, sized by
// the layer's own head dim and KV heads (state_spec.cpp).
#pragma once

#include <string>
#include <vector>

#include "model/arch.h"
#include "model/attention.h"
#include "model/binder.h"
#include "model/matmul.h"
#include "model/state/kv_rows.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct Gemma4AttnWeights {
  WeightMatrix wq, wk, wo;
  WeightMatrix wv;                      // absent (data null) when v_from_k
  bool has_v = false;
  const float* q_norm = nullptr;        // {head_dim}
  const float* k_norm = nullptr;        // {head_dim}
  const float* freq_factors = nullptr;  // rope_freqs.weight {n_rot/2}, or null
  HParams geom;                         // HParams with this layer's head_dim, head_dim_v, n_head_kv
  RopeParams rope;                      // this layer's RoPE
};

// Binds `prefix`attn_{q,k,v,output}.weight, attn_{q,k}_norm.weight and
// (d.rope_freqs) rope_freqs.weight for a layer declared by `d`.
Gemma4AttnWeights bind_gemma4_attention(Binder& b, const std::string& prefix, const AttentionDesc& d,
                                        const HParams& hp);

class Gemma4Attention {
 public:
  // As GqaAttention::run: xn, T normed rows at positions pos0..; writes T rows
  // of attn_output's result to `out`; the new rows go into `kv`.
  void run(const Gemma4AttnWeights& w, const AttentionOptions& opt, const float* xn, int T, int pos0, int layer,
           KvRows& kv, QuantizedRows& act, ThreadPool& pool, float* out);

 private:
  std::vector<float> q_, k_, v_, attn_;
  Attention attention_;
};

}  // namespace sluice::model
