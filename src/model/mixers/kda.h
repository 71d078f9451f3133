// The Kimi Delta Attention token mixer (AttentionKind::Kda; bailingmoe3,
// llama.cpp's src/models/bailingmoe3.cpp + delta-net-base.cpp), for one layer
// of H heads of dimension S (D = H S):
//   q, k, v = SiLU(causal depthwise conv (K taps, ssm_conv1d_{q,k,v}) of
//             attn_{q,k,v} . x), each over its own D channels;
//   q, k L2-normalised per head (x / max(||x||, eps), eps = the RMS eps), q
//   scaled by 1/sqrt(S);
//   decay = exp(g), g = lower_bound * sigmoid(ssm_a[h] * (ssm_f_a . x + ssm_dt.bias))
//   per channel (the key dimension i of head h), lower_bound < 0
//   (kda.gate_lower_bound); beta = sigmoid(ssm_beta . x) per head;
//   per head, per token in order (kernels/deltanet.h, kda_step):
//     M[i][:] <- decay[i] M[i][:]; delta = beta (v - M^T k); M <- M + k delta^T; o = M^T q;
//   o <- RMSNorm(o) * ssm_norm * sigmoid(ssm_g_a . x) per head; out = attn_output . o.
//
// Bit-identity as the gated DeltaNet's (gated_deltanet.h): the recurrent form
// for prompts too, heads in parallel, each walking its tokens in order.
//
// State: one RecurrentState per layer sized as a DeltaNet's with n_k = n_v = H
// (HParams::deltanet): the conv taps of q, k and v ([3][K-1][D], q's first),
// then H S x S matrices; ModelState's checkpoints roll it back.
#pragma once

#include <string>
#include <vector>

#include "model/binder.h"
#include "model/hparams.h"
#include "model/matmul.h"
#include "model/mixers/gated_deltanet.h"
#include "model/thread_pool.h"

namespace sluice::model {

struct KdaWeights {
  WeightMatrix q, k, v;  // attn_q, attn_k, attn_v: n_embd -> D
  WeightMatrix f_a;      // ssm_f_a: n_embd -> D (the decay gate's input)
  WeightMatrix beta;     // ssm_beta: n_embd -> H
  WeightMatrix g_a;      // ssm_g_a: n_embd -> D (the output gate)
  WeightMatrix out;      // attn_output: D -> n_embd
  const float* dt_bias = nullptr;  // ssm_dt.bias {D}
  const float* a = nullptr;        // ssm_a {1, H}
  const float* norm = nullptr;     // ssm_norm {S}
  std::vector<float> conv_w[3];    // ssm_conv1d_{q,k,v} {K, 1, D} as tap-major [K][D]
};

// Binds `prefix`'s KDA tensors, shapes from hp.deltanet (state_size S,
// n_v_heads H, conv_kernel K).
KdaWeights bind_kda(Binder& b, const std::string& prefix, const HParams& hp);

class KimiDeltaAttention {
 public:
  // As GatedDeltaNet::run: T rows of xn into out (before the residual add),
  // advancing `state` (conv = the three tap blocks) by T tokens.
  void run(const KdaWeights& w, const HParams& hp, const float* xn, int T, DeltaNetStateView state, float* out,
           ThreadPool& pool, QuantizedRows& act);

 private:
  std::vector<float> proj_[3], conv_[3], gate_, beta_, g_, o_;
};

}  // namespace sluice::model
