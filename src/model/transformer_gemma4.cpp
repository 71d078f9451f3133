// Gemma 4's block (BlockKind::Gemma4; llama.cpp's src/models/gemma4.cpp), in
// the shared Transformer:
//   a = RMSNorm(Attn(RMSNorm(x) * attn_norm)) * post_attention_norm + x
//   m = RMSNorm(MLP_gelu(RMSNorm(a) * ffn_norm)) * post_ffw_norm_1         (the dense "shared expert")
//   y = RMSNorm(sum_j w_j s_j Expert_gelu_j(RMSNorm(a) * pre_ffw_norm_2)) * post_ffw_norm_2
//       router logits = ffn_gate_inp . (RMSNorm(a) / sqrt(n_embd) * ffn_gate_inp.scale),
//       softmax over all experts, top-k renormalised; s_j = ffn_down_exps.scale[j]
//   x = (RMSNorm(m + y) * post_ffw_norm + a) * layer_output_scale
// The input embedding scale and the final logit softcap are HParams
// (embd_scale, logit_softcap), applied where every architecture embeds and
// produces logits.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "kernels/ops.h"
#include "model/binder.h"
#include "model/norm.h"
#include "model/transformer.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::model {

void Transformer::bind_gemma4_layer(Binder& b, uint32_t il, const LayerDesc& d,
                                    const std::vector<gguf::LayerExpertParts>& experts) {
  const uint64_t n_embd = hp_.n_embd, n_expert = hp_.n_expert;
  const std::string p = "blk." + std::to_string(il) + ".";
  Layer& L = layers_[il];
  L.attn_norm = b.vector(p + "attn_norm.weight", n_embd);
  L.ffn_norm = b.vector(p + "ffn_norm.weight", n_embd);
  L.g4attn = bind_gemma4_attention(b, p, d.attn, hp_);
  Gemma4Norms& g = L.g4;
  g.post_attention = b.vector(p + "post_attention_norm.weight", n_embd);
  g.post_ffw_1 = b.vector(p + "post_ffw_norm_1.weight", n_embd);
  g.pre_ffw_2 = b.vector(p + "pre_ffw_norm_2.weight", n_embd);
  g.post_ffw_2 = b.vector(p + "post_ffw_norm_2.weight", n_embd);
  g.post_ffw = b.vector(p + "post_ffw_norm.weight", n_embd);
  g.router_scale = b.vector(p + "ffn_gate_inp.scale", n_embd);
  // Optional in llama.cpp's loader, as is ffn_down_exps.scale.
  if (b.find(p + "layer_output_scale.weight")) g.layer_output_scale = b.vector(p + "layer_output_scale.weight", 1);
  L.dense.gate = b.matrix(p + "ffn_gate.weight", n_embd, d.ffn.n_ff);
  L.dense.up = b.matrix(p + "ffn_up.weight", n_embd, d.ffn.n_ff);
  L.dense.down = b.matrix(p + "ffn_down.weight", d.ffn.n_ff, n_embd);
  L.moe = true;
  L.router = b.matrix(p + "ffn_gate_inp.weight", n_embd, n_expert);
  ExpertTemplate& x = L.experts;
  bind_expert_matrices(b, il, experts.at(il),
                       p + "ffn_gate_up_exps.weight (or ffn_gate_exps/ffn_up_exps)", x);
  if (b.find(p + "ffn_down_exps.scale")) x.expert_scale = b.vector(p + "ffn_down_exps.scale", n_expert);
}

void Transformer::softcap_logits(float* logits, int64_t n_rows) const {
  const float cap = hp_.logit_softcap;
  if (cap == 0.0f) return;
  const int64_t n = n_rows * static_cast<int64_t>(hp_.n_vocab);
  for (int64_t i = 0; i < n; ++i) logits[i] = std::tanh(logits[i] * (1.0f / cap)) * cap;
}

void Transformer::forward_gemma4_layer(int il, int T, std::span<const RowSegment> segs, int st_layer) {
  const Layer& L = layers_[il];
  const LayerDesc& d = *L.desc;
  const Gemma4Norms& g = L.g4;
  const int64_t n_embd = hp_.n_embd;
  const size_t n = static_cast<size_t>(T) * static_cast<size_t>(n_embd);
  const float eps = hp_.rms_eps;

  // Attention, post-normed, added to the residual: x_ becomes a.
  const auto t_attn = std::chrono::steady_clock::now();
  rms_norm_rows(x_.data(), L.attn_norm, T, n_embd, eps, xn_.data());
  for (const RowSegment& sg : segs) {
    const int64_t off = static_cast<int64_t>(sg.row0) * n_embd;
    const AttentionOptions opt{d.attn.window, nullptr, hp_.attn_scale, false};
    gemma4_attn_.run(L.g4attn, opt, xn_.data() + off, sg.n, sg.pos0, il, sg.st->kv(st_layer), act_, pool_,
                     tmp_.data() + off);
  }
  rms_norm_rows(tmp_.data(), g.post_attention, T, n_embd, eps, tmp_.data());
  for (size_t i = 0; i < n; ++i) x_[i] += tmp_[i];
  attention_s_ += seconds_since(t_attn);

  // The dense GELU MLP.
  g4_mlp_.resize(n);
  rms_norm_rows(x_.data(), L.ffn_norm, T, n_embd, eps, xn_.data());
  dense_ffn(L.dense, d.ffn.act, T, g4_mlp_.data());
  rms_norm_rows(g4_mlp_.data(), g.post_ffw_1, T, n_embd, eps, g4_mlp_.data());

  // The router reads RMSNorm(a) / sqrt(n_embd) * ffn_gate_inp.scale.
  rms_norm_rows(x_.data(), nullptr, T, n_embd, eps, xn_.data());
  const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(n_embd));
  for (int t = 0; t < T; ++t) {
    float* r = &xn_[static_cast<size_t>(t) * n_embd];
    for (int64_t i = 0; i < n_embd; ++i) r[i] = r[i] * inv_sqrt * g.router_scale[i];
  }
  router_logits(L, xn_.data(), T, router_logits_);
  // The experts read RMSNorm(a) * pre_ffw_norm_2.
  rms_norm_rows(x_.data(), g.pre_ffw_2, T, n_embd, eps, xn_.data());
  routed_experts(il, T, segs, nullptr);
  rms_norm_rows(tmp_.data(), g.post_ffw_2, T, n_embd, eps, tmp_.data());

  for (size_t i = 0; i < n; ++i) tmp_[i] += g4_mlp_[i];
  rms_norm_rows(tmp_.data(), g.post_ffw, T, n_embd, eps, tmp_.data());
  for (size_t i = 0; i < n; ++i) x_[i] = tmp_[i] + x_[i];
  if (g.layer_output_scale)
    for (size_t i = 0; i < n; ++i) x_[i] *= *g.layer_output_scale;
}


}  // namespace sluice::model
