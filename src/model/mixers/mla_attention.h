// The multi-head latent attention mixer (AttentionKind::Mla, DeepSeek-V2/V3)
// in the absorbed form llama.cpp runs (HParams::MlaParams): per position the
// layer's KV rows hold k = [norm(kv_cmpr), rope(k_pe)]; per head the query is
// [k_b_h . q_nope_h, rope(q_pe_h)], so a score is one dot over the cached row,
// and the head's output is v_b_h . (sum_j p_j kv_cmpr_j).
// State: one KvRows per layer of one latent row per position, rolled back exactly.
#pragma once

#include <string>
#include <vector>

#include "model/attention.h"
#include "model/binder.h"
#include "model/matmul.h"
#include "model/rope.h"
#include "model/state/kv_rows.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct MlaWeights {
  // q = wq_b(norm(wq_a x)) (q_lora_rank > 0) or wq x; wkv_a x = [compressed
  // kv, k rope part]; per head, k_b absorbs q's nope part into the compressed
  // space and v_b maps the attended latent to the head's values.
  WeightMatrix wq, wq_a, wq_b, wkv_a, wo;
  const float* q_a_norm = nullptr;
  const float* kv_a_norm = nullptr;
  std::vector<WeightMatrix> k_b, v_b;  // [n_head]
  // bailingmoe3: attn_gate {n_embd, n_head}; each head's values are scaled by
  // sigmoid(attn_gate . xn) before attn_output (absent: no gate).
  WeightMatrix head_gate;
  bool has_head_gate = false;
};

// head_gate: also bind `prefix`attn_gate.weight (AttentionDesc::head_gate).
MlaWeights bind_mla(Binder& b, const std::string& prefix, const HParams& hp, bool head_gate = false);

class MlaAttention {
 public:
  // As GqaAttention::run: T rows of the output projection into `out`.
  void run(const MlaWeights& w, const AttentionOptions& opt, const HParams& hp, const float* xn, int T, int pos0,
           int layer, KvRows& kv, RopeAngles& rope, QuantizedRows& act, ThreadPool& pool, float* out);

  // The two halves of run() around the attention, for mixers that attend
  // differently (DSA: model/mixers/dsa_attention.h). prepare() computes, for
  // T rows at positions pos0.., the normalised q LoRA (q_lora(), [T][q_lora_rank];
  // only with q_lora_rank > 0), the rows to cache (latent_rows(), [T][head_dim]:
  // [norm(kv_cmpr) | rope(k_pe)]) and the absorbed queries (queries(),
  // [T][n_head][head_dim]); nothing is stored. finish() maps the attended
  // latents attn [T][n_head][kv_lora_rank] through v_b (times the head gate
  // prepare() computed, where the layer has one) and attn_output into `out`.
  void prepare(const MlaWeights& w, const HParams& hp, const float* xn, int T, int pos0, RopeAngles& rope,
               QuantizedRows& act, ThreadPool& pool);
  const float* q_lora() const { return qa_.data(); }
  const float* latent_rows() const { return k_.data(); }
  const float* queries() const { return v_.data(); }
  void finish(const MlaWeights& w, const HParams& hp, const float* attn, int T, QuantizedRows& act, ThreadPool& pool,
              float* out);

 private:
  std::vector<float> q_, k_, v_, attn_, qa_, in_, out_, gate_;
  Attention attention_;
};

}  // namespace sluice::model
