// MLA with DeepSeek sparse attention (DSA), as glm-dsa (GLM-5.x) runs it: the
// "lightning indexer" picks, per query, the top_k past positions by its own
// score, and the absorbed MLA attention (model/mixers/mla_attention.h) sees
// only those keys. HParams::dsa holds the indexer's sizes; the layer's
// AttentionDesc::indexer says whether it runs the indexer (Full) or reuses
// the selection of the nearest Full layer below it (Shared).
//
// The indexer of a Full layer at position i (qr = the MLA query's normalised
// q LoRA, h = the layer's normed input):
//   iq = indexer.attn_q_b . qr, n_head heads of D dims, RoPE (NORM pairs) on the
//        FIRST n_rot dims of each head (the indexer layout is [rope | nope]);
//   ik = LayerNorm(indexer.attn_k . h) * k_norm.weight + k_norm.bias, eps 0
//        (llama.cpp's f_norm_eps, which glm-dsa never sets), RoPE likewise;
//   w  = indexer.proj . h / sqrt(D * n_head);
//   score(i, j) = sum_g w_g(i) * max(0, iq_g(i) . ik(j)) for j <= i (summed
//        in head order, F32).
// S_i = the top_k positions j <= i by score; every j <= i when i < top_k.
// Ties (e.g. every head's q.k <= 0, score exactly 0) are broken towards the
// lower position, deterministically (llama.cpp's std::partial_sort breaks them
// arbitrarily). llama.cpp also rotates iq and ik by a Walsh-Hadamard matrix,
// which leaves every dot product unchanged up to rounding; it is not done here.
//
// State: the layer's KV rows; a Full layer's row is [latent (kv_lora_rank) |
// k_pe (rope) | ik (D)] (KvRowsSpec::index_dim), so the indexer keys roll
// back exactly with the latent rows and follow --kv-type.
// Determinism: every score and every head's attention is computed by one
// thread with the same operations whatever T, pos0 or the pool size, so the
// selection and the output do not depend on micro-batching or threads.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/attention.h"
#include "model/binder.h"
#include "model/matmul.h"
#include "model/mixers/mla_attention.h"
#include "model/rope.h"
#include "model/state/kv_rows.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct DsaIndexerWeights {
  WeightMatrix wq_b;  // q_lora_rank -> n_head * D
  WeightMatrix wk;    // n_embd -> D
  WeightMatrix proj;  // n_embd -> n_head
  const float* k_norm = nullptr;
  const float* k_norm_bias = nullptr;
};

// The indexer tensors of a Full layer (prefix "blk.N.").
DsaIndexerWeights bind_dsa_indexer(Binder& b, const std::string& prefix, const HParams& hp);

// Called with the positions a Full layer selected for query position `pos`
// (ascending). For tests: the selection against llama.cpp's.
using DsaSelectionObserver = std::function<void(int layer, int pos, std::span<const int32_t> keys)>;

class DsaAttention {
 public:
  // As MlaAttention::run, for the T rows of one sequence that sit at rows
  // [row0, row0 + T) of the current micro-batch (a Shared layer reads the
  // selection its Full layer left for those rows). A Full layer's `ix` is
  // bound; kv's rows have hp.head_dim (+ D for a Full layer) values.
  void run(const MlaWeights& w, const DsaIndexerWeights* ix, DsaIndexer kind, float scale, const HParams& hp,
           const float* xn, int T, int pos0, int row0, int layer, KvRows& kv, RopeAngles& rope, QuantizedRows& act,
           ThreadPool& pool, float* out);
  void set_observer(DsaSelectionObserver f) { observer_ = std::move(f); }

 private:
  // The indexer of a Full layer: stores the rows (latent + indexer key) and
  // fills the selection of rows [row0, row0 + T).
  void select(const DsaIndexerWeights& ix, const HParams& hp, const float* xn, int T, int pos0, int row0, int layer,
              KvRows& kv, RopeAngles& rope, QuantizedRows& act, ThreadPool& pool);
  // Sparse attention of the T rows over their selected keys into attn_.
  void attend(const HParams& hp, float scale, int T, int row0, const KvRows& kv, ThreadPool& pool);

  MlaAttention mla_;
  std::vector<float> iq_, ik_, w_, rows_, attn_, gathered_, score_;
  std::vector<int32_t> sel_;  // [row][top_k]: selected positions, ascending
  std::vector<int> sel_n_;    // [row]: how many
  DsaSelectionObserver observer_;
};

}  // namespace sluice::model
