// DeepSeek V4's attention (deepseek4; llama.cpp's src/models/deepseek4.cpp,
// the math in shared/golden/README.md): one K = V head per token (q LoRA,
// per-head q RMSNorm, RoPE on the LAST n_rot dims of a head), a sliding window
// of raw keys plus compressed blocks of the layer's compress ratio R:
//   R = 128 (HCA): every completed block of 128 tokens, a per-channel softmax
//                  pooling of the compressor's kv;
//   R = 4   (CSA): overlapping blocks (the previous block's tokens in the
//                  first hd channels, its own in the second), of which the
//                  lightning indexer picks the top_k per query;
//   R = 0:         the window only.
// Per-head sinks join the softmax denominator; the heads' outputs are
// de-roped, then projected in output_group_count groups through the low-rank
// attn_output_a, then attn_output_b.
//
// State (state_spec.h): per position a KvRows row laid out by Dsv4RowLayout:
// the roped kv, then (R > 0) the compressor's kv and gate scores of this
// token, (R = 4) the indexer compressor's kv and scores. Those rows are a ring
// holding dsv4_lookback() positions (plus the slack) where that is less than
// the context: a token reads the window's raw keys, and the block completed
// at its position reads its own R tokens' compressor inputs (R = 4: the
// previous block's too). Per completed block b, a row of `blocks`: the
// compressed entry (hd) and (R = 4) the indexer key (D), written by the
// append that holds position (b + 1) R - 1. Everything a row holds depends
// only on positions up to its own, so truncation is exact while the ring
// holds the lookback (ModelState).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/arch.h"
#include "model/binder.h"
#include "model/matmul.h"
#include "model/state/kv_rows.h"
#include "model/thread_pool.h"

namespace sluice::model {

// Float offsets inside one position's row (see above); absent parts have width 0.
// A block row holds the compressed entry at [0, hd), the indexer key at [hd, hd + d).
struct Dsv4RowLayout {
  int kv = 0, ckv = 0, csc = 0, ikv = 0, isc = 0;  // offsets
  int hd = 0, c = 0, d = 0;  // head dim, compressor width (hd or 2 hd), indexer head dim (0: none)
  int total = 0;             // floats per position
  int block_width = 0;       // floats per completed block (0 for R = 0)
};
Dsv4RowLayout dsv4_row_layout(uint32_t ratio, const HParams& hp);
// How many positions back (the token's own included) a token at position n
// reads per-position rows: the window, and the R (R = 4: 2 R) positions whose
// compressor inputs the block completed at n pools. 0: unbounded (no window).
int dsv4_lookback(const AttentionDesc& d);

struct Dsv4AttnWeights {
  WeightMatrix q_a, q_b, kv;
  const float* q_a_norm = nullptr;
  const float* kv_norm = nullptr;
  const float* sinks = nullptr;
  std::vector<WeightMatrix> o_a;  // [o_groups]: {n_head hd / G -> o_lora_rank}
  WeightMatrix o_b;
  // R > 0: the compressor.
  WeightMatrix c_kv, c_gate;
  const float* c_ape = nullptr;   // [R][C]
  const float* c_norm = nullptr;  // [hd]
  // R = 4: the lightning indexer.
  WeightMatrix i_q_b, i_proj, i_kv, i_gate;
  const float* i_ape = nullptr;   // [4][2D]
  const float* i_norm = nullptr;  // [D]
};

Dsv4AttnWeights bind_dsv4_attention(Binder& b, const std::string& prefix, const AttentionDesc& d, const HParams& hp);

// Sees, for every query position of a CSA layer, the compressed blocks the
// indexer selected (ascending), or every visible block when there are at most top_k.
using Dsv4SelectionObserver = std::function<void(int layer, int pos, const std::vector<int>& blocks)>;

class Dsv4Attention {
 public:
  // h: T rows of the normed sublayer input (n_embd) at positions pos0..;
  // stores the T rows into `kv` and the blocks they complete into `blocks`
  // (both reserved by the caller's append) and writes T rows of n_embd to `out`.
  // `blocks`: the layer's completed-block rows (unused for R = 0).
  void run(const Dsv4AttnWeights& w, const AttentionDesc& d, const HParams& hp, const float* h, int T, int pos0,
           int layer, KvRows& kv, KvRows* blocks, QuantizedRows& act, ThreadPool& pool, float* out);
  void set_observer(Dsv4SelectionObserver f) { observer_ = std::move(f); }

 private:
  std::vector<float> qr_, q_, kvr_, ckv_, csc_, ikv_, isc_, iq_, iw_, row_, o_, oa_, og_;
  Dsv4SelectionObserver observer_;
};

}  // namespace sluice::model
