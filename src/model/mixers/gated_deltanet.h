// The gated DeltaNet token mixer (Qwen3.5/3.6 `qwen35moe`, llama.cpp's
// src/models/qwen35moe.cpp + delta-net-base.cpp), for one layer:
//   [q | k | v] = attn_qkv . x, z = attn_gate . x,
//   beta = sigmoid(ssm_beta . x), g = softplus(ssm_alpha . x + ssm_dt.bias) * ssm_a (per value head),
//   causal depthwise conv (K taps, ssm_conv1d) over [q | k | v], SiLU,
//   q, k L2-normalised per head (x / max(||x||, eps)), q scaled by 1/sqrt(S),
//   per value head h (reading key/query head h mod n_k), per token in order:
//     M <- exp(g) M; delta = beta (v - M^T k); M <- M + k delta^T; o = M^T q,
//   o <- RMSNorm(o) * ssm_norm * SiLU(z) per head, out = ssm_out . o.
//
// Bit-identity: the recurrent (token-by-token) form is used for prompts too,
// never a chunked one (whose rounding depends on where chunks start). Each
// value head walks its tokens in order with its S x S matrix in cache, heads
// run in parallel (which thread runs a head changes nothing), and every other
// step is per row: the output is the same bits for any micro-batch split and
// thread count.
//
// State: one RecurrentState per layer (model/state/, StateKind::Recurrent),
// passed as a plain view; ModelState's checkpoints make it roll back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/binder.h"
#include "model/hparams.h"
#include "model/matmul.h"
#include "model/thread_pool.h"

namespace sluice::model {

// One DeltaNet layer's recurrent state, owned by the caller.
struct DeltaNetStateView {
  float* conv = nullptr;      // [(K-1)][channels], oldest tap first; zero at a sequence start
  float* matrices = nullptr;  // [n_v][S][S] (row = key dim), zero at a sequence start
  // Row checkpoints (ModelState::row_capture): for t < n_row_dst, row_dst[t]
  // receives the state at the end of row t, conv taps then matrices.
  float* const* row_dst = nullptr;
  int n_row_dst = 0;
};

// Sizes of that state, in floats.
inline uint64_t deltanet_conv_floats(const DeltaNetParams& p) {
  return uint64_t{p.conv_kernel > 0 ? p.conv_kernel - 1 : 0} * p.channels();
}
inline uint64_t deltanet_matrix_floats(const DeltaNetParams& p) {
  return uint64_t{p.n_v_heads} * p.state_size * p.state_size;
}

// One layer's bound weights.
struct DeltaNetWeights {
  WeightMatrix qkv;    // attn_qkv: n_embd -> channels
  WeightMatrix gate;   // attn_gate: n_embd -> n_v S (z)
  WeightMatrix alpha;  // ssm_alpha: n_embd -> n_v
  WeightMatrix beta;   // ssm_beta: n_embd -> n_v
  WeightMatrix out;    // ssm_out: n_v S -> n_embd
  const float* dt_bias = nullptr;  // ssm_dt.bias {n_v}
  const float* a = nullptr;        // ssm_a {n_v}: -exp(A_log), stored negated
  const float* norm = nullptr;     // ssm_norm {S}
  std::vector<float> conv_w;       // ssm_conv1d {K, channels} transposed to tap-major [K][channels]
};

// Tap-major copy [K][C] of ssm_conv1d's [C][K] (ggml ne {K, C}) F32 data.
std::vector<float> deltanet_conv_taps(const float* conv1d, uint32_t K, uint64_t C);

// Binds `prefix`attn_qkv, attn_gate, ssm_alpha, ssm_beta, ssm_out (.weight),
// ssm_dt.bias, ssm_a, ssm_norm.weight and ssm_conv1d.weight, shapes from hp.deltanet.
DeltaNetWeights bind_deltanet(Binder& b, const std::string& prefix, const HParams& hp);

class GatedDeltaNet {
 public:
  // Mixes T rows of xn (the normed input, [T][n_embd]) into out ([T][n_embd],
  // before the residual add), advancing `state` by T tokens.
  void run(const DeltaNetWeights& w, const HParams& hp, const float* xn, int T, DeltaNetStateView state, float* out,
           ThreadPool& pool, QuantizedRows& act);

 private:
  std::vector<float> qkv_, conv_, z_, alpha_, beta_, decay_, o_;
};

}  // namespace sluice::model
