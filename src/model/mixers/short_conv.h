// The gated short-convolution token mixer of LFM2 (`lfm2`, `lfm2moe`;
// llama.cpp's src/models/lfm2.cpp build_shortconv_block), for one layer:
//   [B | C | x] = shortconv.in_proj . xn   (three n_embd chunks, in that order)
//   bx = B * x                                     (elementwise)
//   y[t, c] = sum_{i<L} bx[t - L + 1 + i, c] * shortconv.conv[c, i]
//             (causal depthwise conv of L = shortconv.l_cache taps, tap L-1 on
//             the current token; inputs before the sequence start are 0)
//   out = shortconv.out_proj . (C * y)
// No activation, no bias.
//
// State: the last L-1 values of bx per channel (RecurrentState's conv part,
// no matrices). The conv steps token by token through kernels' conv_step, so
// the bits do not depend on how a sequence is split or on the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/binder.h"
#include "model/hparams.h"
#include "model/matmul.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct ShortConvWeights {
  WeightMatrix in_proj;   // n_embd -> 3 n_embd ([B | C | x])
  WeightMatrix out_proj;  // n_embd -> n_embd
  std::vector<float> taps;  // shortconv.conv {L, n_embd} as tap-major [L][n_embd]
  uint32_t L = 0;           // taps (AttentionDesc::conv_taps)
};

// Binds `prefix`shortconv.in_proj/out_proj/conv (.weight) for L taps; the conv must be F32.
ShortConvWeights bind_short_conv(Binder& b, const std::string& prefix, const HParams& hp, uint32_t L);

class ShortConv {
 public:
  // Mixes T rows of xn ([T][n_embd]) into out ([T][n_embd], before the
  // residual add), advancing conv_state ([L-1][n_embd], oldest first) by T tokens.
  void run(const ShortConvWeights& w, const HParams& hp, const float* xn, int T, float* conv_state, float* out,
           ThreadPool& pool, QuantizedRows& act);

 private:
  std::vector<float> bcx_, bx_, y_;
};

}  // namespace sluice::model
