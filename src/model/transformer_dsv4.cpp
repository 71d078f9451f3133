// DeepSeek V4's block (BlockKind::Dsv4; llama.cpp's src/models/deepseek4.cpp,
// the math in shared/golden/README.md) in the shared Transformer. A row of
// x_ holds hc = hyper_connection.count residual streams X[0..hc) of n_embd.
// Each sublayer F (attention, then the MoE) is wrapped in a hyper-connection:
//   mix = fn . RMSNorm(X flat)                       ((2 + hc) hc values)
//   pre[s]  = sigmoid(mix[s] scale0 + base[s]) + eps
//   post[d] = 2 sigmoid(mix[hc + d] scale1 + base[hc + d])
//   M[d][s] = mix[2hc + d + hc s] scale2 + base[...], Sinkhorn-normalised
//   y = F(sum_s pre[s] X[s]);  X[d] <- post[d] y + sum_s M[d][s] X[s]
// The output head mixes the streams once more (output_hc_*) before output_norm.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "model/activation.h"
#include "model/binder.h"
#include "model/norm.h"
#include "model/router.h"
#include "model/transformer.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// Sinkhorn normalisation of the hc x hc matrix m[d * hc + s] (d: destination,
// s: source): a softmax over d of every column plus eps, a row normalisation,
// then iters - 1 rounds of column and row normalisation.
void sinkhorn(float* m, int hc, int iters, float eps) {
  for (int s = 0; s < hc; ++s) {
    float mx = -INFINITY;
    for (int d = 0; d < hc; ++d) mx = std::max(mx, m[d * hc + s]);
    float sum = 0.0f;
    for (int d = 0; d < hc; ++d) sum += m[d * hc + s] = std::exp(m[d * hc + s] - mx);
    for (int d = 0; d < hc; ++d) m[d * hc + s] = m[d * hc + s] / sum + eps;
  }
  auto rows = [&] {
    for (int d = 0; d < hc; ++d) {
      float sum = 0.0f;
      for (int s = 0; s < hc; ++s) sum += m[d * hc + s];
      for (int s = 0; s < hc; ++s) m[d * hc + s] /= eps + sum;
    }
  };
  auto cols = [&] {
    for (int s = 0; s < hc; ++s) {
      float sum = 0.0f;
      for (int d = 0; d < hc; ++d) sum += m[d * hc + s];
      for (int d = 0; d < hc; ++d) m[d * hc + s] /= eps + sum;
    }
  };
  rows();
  for (int i = 1; i < iters; ++i) {
    cols();
    rows();
  }
}

}  // namespace

void Transformer::bind_dsv4_layer(Binder& b, uint32_t il, const LayerDesc& d,
                                  const std::vector<gguf::LayerExpertParts>& experts) {
  const uint64_t n_embd = hp_.n_embd, n_expert = hp_.n_expert, hc = hp_.dsv4.hc_count;
  const std::string p = "blk." + std::to_string(il) + ".";
  Layer& L = layers_[il];
  L.attn_norm = b.vector(p + "attn_norm.weight", n_embd);
  L.ffn_norm = b.vector(p + "ffn_norm.weight", n_embd);
  L.dsv4 = bind_dsv4_attention(b, p, d.attn, hp_);
  for (auto [site, hw] : {std::pair{"hc_attn", &L.hc_attn}, std::pair{"hc_ffn", &L.hc_ffn}}) {
    hw->fn = b.matrix(p + site + "_fn.weight", hc * n_embd, (2 + hc) * hc);
    hw->base = b.vector(p + site + "_base.weight", (2 + hc) * hc);
    hw->scale = b.vector(p + site + "_scale.weight", 3);
  }
  L.moe = true;
  L.router = b.matrix(p + "ffn_gate_inp.weight", n_embd, n_expert);
  if (d.ffn.router.kind == RouterKind::HashSqrtSoftplus) {
    const std::string name = p + "ffn_gate_tid2eid.weight";
    const gguf::TensorInfo& t = b.shaped(name, {hp_.n_expert_used, hp_.n_vocab});
    if (t.type != GgmlType::I32)
      throw Error("unsupported tensor type " + std::string(ggml_type_name(t.type)) + " in tensor " +
                  name + " (the token -> experts table must be I32)");
    L.tid2eid = static_cast<const int32_t*>(dense_->data(t));
    for (uint64_t i = 0; i < uint64_t{hp_.n_expert_used} * hp_.n_vocab; ++i)
      if (L.tid2eid[i] < 0 || static_cast<uint64_t>(L.tid2eid[i]) >= n_expert)
        throw Error("tensor " + name + ": entry " + std::to_string(i) + " is expert " +
                    std::to_string(L.tid2eid[i]) + ", not in [0, " + std::to_string(n_expert) +
                    ")");
  } else {
    L.selection_bias = b.vector(p + "exp_probs_b.bias", n_expert);
  }
  bind_expert_matrices(b, il, experts.at(il), gguf::stacked_expert_name(il, gguf::kGate),
                       L.experts);
  L.shared = true;
  L.shexp.gate = b.matrix(p + "ffn_gate_shexp.weight", n_embd, d.ffn.n_ff);
  L.shexp.up = b.matrix(p + "ffn_up_shexp.weight", n_embd, d.ffn.n_ff);
  L.shexp.down = b.matrix(p + "ffn_down_shexp.weight", d.ffn.n_ff, n_embd);
}

void Transformer::route_dsv4_hash(int il, int T) {
  const Layer& L = layers_[il];
  if (moe_k_ != static_cast<int>(hp_.n_expert_used))
    throw Error("--moe-top-k: layer " + std::to_string(il) + " routes by token id to exactly " +
                std::to_string(hp_.n_expert_used) + " experts (ffn_gate_tid2eid)");
  route_by_token(L.desc->ffn.router, L.tid2eid, row_tokens_.data(), router_logits_.data(), T,
                 static_cast<int>(hp_.n_expert), moe_k_, routing_);
}

void Transformer::forward_dsv4_layer(int il, int T, std::span<const RowSegment> segs,
                                     int st_layer) {
  const Layer& L = layers_[il];
  const LayerDesc& d = *L.desc;
  const int64_t n = hp_.n_embd, hc = hp_.dsv4.hc_count, W = n * hc, n_mix = (2 + hc) * hc;
  const float eps = hp_.rms_eps, hc_eps = hp_.dsv4.hc_eps;
  std::vector<float> flat(static_cast<size_t>(T * W)), pre(static_cast<size_t>(T * hc)),
      post(static_cast<size_t>(T * hc)), comb(static_cast<size_t>(T * hc * hc));
  hc_u_.resize(static_cast<size_t>(T * n));
  hc_mix_.resize(static_cast<size_t>(T * n_mix));

  // The sublayer's input u (hc_u_) and this site's post and comb weights.
  auto hc_pre = [&](const HcWeights& h) {
    rms_norm_rows(x_.data(), nullptr, T, W, eps, flat.data());
    matmul_f32(h.fn, flat.data(), T, hc_mix_.data(), pool_, act_);
    for (int t = 0; t < T; ++t) {
      const float* mix = &hc_mix_[static_cast<size_t>(t * n_mix)];
      float* pr = &pre[static_cast<size_t>(t * hc)];
      float* po = &post[static_cast<size_t>(t * hc)];
      float* m = &comb[static_cast<size_t>(t * hc * hc)];
      for (int64_t s = 0; s < hc; ++s) {
        pr[s] = sigmoid(mix[s] * h.scale[0] + h.base[s]) + hc_eps;
        po[s] = 2.0f * sigmoid(mix[hc + s] * h.scale[1] + h.base[hc + s]);
      }
      for (int64_t dd = 0; dd < hc; ++dd)
        for (int64_t s = 0; s < hc; ++s)
          m[dd * hc + s] = mix[2 * hc + dd + hc * s] * h.scale[2] + h.base[2 * hc + dd + hc * s];
      sinkhorn(m, static_cast<int>(hc), static_cast<int>(hp_.dsv4.sinkhorn_iters), hc_eps);
      const float* X = &x_[static_cast<size_t>(t * W)];
      float* u = &hc_u_[static_cast<size_t>(t * n)];
      for (int64_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int64_t s = 0; s < hc; ++s) acc += pr[s] * X[s * n + i];
        u[i] = acc;
      }
    }
  };
  // X[d] <- post[d] y + sum_s M[d][s] X[s], y = tmp_'s rows.
  auto hc_post = [&] {
    std::vector<float> nx(static_cast<size_t>(W));
    for (int t = 0; t < T; ++t) {
      float* X = &x_[static_cast<size_t>(t * W)];
      const float* y = &tmp_[static_cast<size_t>(t * n)];
      const float* po = &post[static_cast<size_t>(t * hc)];
      const float* m = &comb[static_cast<size_t>(t * hc * hc)];
      for (int64_t dd = 0; dd < hc; ++dd)
        for (int64_t i = 0; i < n; ++i) {
          float acc = po[dd] * y[i];
          for (int64_t s = 0; s < hc; ++s) acc += m[dd * hc + s] * X[s * n + i];
          nx[static_cast<size_t>(dd * n + i)] = acc;
        }
      std::copy(nx.begin(), nx.end(), X);
    }
  };

  const auto t_attn = std::chrono::steady_clock::now();
  hc_pre(L.hc_attn);
  rms_norm_rows(hc_u_.data(), L.attn_norm, T, n, eps, xn_.data());
  for (const RowSegment& sg : segs) {
    const int64_t off = static_cast<int64_t>(sg.row0) * n;
    dsv4_attn_.run(L.dsv4, d.attn, hp_, xn_.data() + off, sg.n, sg.pos0, il, sg.st->kv(st_layer),
                   sg.st->blocks(st_layer), act_, pool_, tmp_.data() + off);
  }
  hc_post();
  attention_s_ += seconds_since(t_attn);

  hc_pre(L.hc_ffn);
  rms_norm_rows(hc_u_.data(), L.ffn_norm, T, n, eps, xn_.data());
  router_logits(L, xn_.data(), T, router_logits_);
  routed_experts(il, T, segs, L.selection_bias);
  shared_out_.resize(static_cast<size_t>(T * n));
  dense_ffn(L.shexp, d.ffn.act, T, shared_out_.data(), d.ffn.clamp_shexp);
  for (size_t i = 0; i < shared_out_.size(); ++i) tmp_[i] += shared_out_[i];
  hc_post();
}

void Transformer::final_norm_rows(const float* x, int rows, float* out) {
  const int64_t n = hp_.n_embd;
  if (hp_.dsv4.hc_count == 0) return rms_norm_rows(x, output_norm_, rows, n, hp_.rms_eps, out);
  hc_head_rows(x, rows, out);
  rms_norm_rows(out, output_norm_, rows, n, hp_.rms_eps, out);
}

void Transformer::hc_head_rows(const float* x, int rows, float* out) {
  const int64_t n = hp_.n_embd, hc = hp_.dsv4.hc_count;
  const int64_t W = n * hc;
  std::vector<float> flat(static_cast<size_t>(rows * W)), mix(static_cast<size_t>(rows * hc));
  rms_norm_rows(x, nullptr, rows, W, hp_.rms_eps, flat.data());
  matmul_f32(hc_head_.fn, flat.data(), rows, mix.data(), pool_, act_);
  for (int t = 0; t < rows; ++t) {
    const float* X = x + t * W;
    float* u = out + t * n;
    std::fill(u, u + n, 0.0f);
    for (int64_t s = 0; s < hc; ++s) {
      const float pre =
          sigmoid(mix[static_cast<size_t>(t * hc + s)] * hc_head_.scale[0] + hc_head_.base[s]) +
          hp_.dsv4.hc_eps;
      for (int64_t i = 0; i < n; ++i) u[i] += pre * X[s * n + i];
    }
  }
}

}  // namespace sluice::model
