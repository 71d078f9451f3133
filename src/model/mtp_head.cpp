#include "model/mtp_head.h"

#include <algorithm>
#include <string>

#include "kernels/quant.h"
#include "model/norm.h"
#include "util/error.h"

namespace sluice::model {

void MtpHead::bind(Binder& b, const NextnDesc& head, const HParams& hp, const moe::DenseWeights& dense,
                   const gguf::TensorInfo* token_embd, const float* output_norm, const WeightMatrix& output) {
  const uint64_t n_embd = hp.n_embd;
  const std::string blk = "blk." + std::to_string(head.layer) + ".";
  const std::string p = blk + "nextn.";
  eh_proj_ = b.matrix(p + "eh_proj.weight", 2 * n_embd, n_embd);
  enorm_ = b.vector(p + "enorm.weight", n_embd);
  hnorm_ = b.vector(p + "hnorm.weight", n_embd);
  const std::string norm = blk + head.head_norm + ".weight";
  norm_ = head.head_norm_need == Need::Required || b.find(norm) ? b.vector(norm, n_embd) : output_norm;
  lm_ = b.find(p + "shared_head_head.weight") ? b.matrix(p + "shared_head_head.weight", n_embd, hp.n_vocab) : output;
  embd_ = token_embd;
  if (b.find(p + "embed_tokens.weight")) {
    embd_ = &b.rows(p + "embed_tokens.weight", {n_embd, hp.n_vocab});
    if (!kernels::is_supported(embd_->type))
      throw Error("unsupported tensor type " + std::string(ggml_type_name(embd_->type)) + " in tensor " + p +
                  "embed_tokens.weight");
  }
  embd_data_ = static_cast<const uint8_t*>(dense.data(*embd_));
}

void MtpHead::input(std::span<const int32_t> tokens, const float* hidden, const HParams& hp, float* x,
                    ThreadPool& pool, QuantizedRows& act) {
  const int T = static_cast<int>(tokens.size());
  const int64_t n_embd = hp.n_embd, hc = std::max<int64_t>(1, hp.dsv4.hc_count);
  const float eps = hp.rms_eps;
  // Per row and stream: the embedding first, then the hidden state.
  cat_.resize(static_cast<size_t>(T * hc) * 2 * n_embd);
  for (int t = 0; t < T; ++t) {
    float* first = &cat_[static_cast<size_t>(t * hc) * 2 * n_embd];
    kernels::dequantize_row(embd_->type, embd_data_ + embd_->row_bytes() * tokens[t], first, n_embd);
    rms_norm(first, enorm_, n_embd, eps, first);
    for (int64_t s = 0; s < hc; ++s) {
      float* cat = first + s * 2 * n_embd;
      if (s > 0) std::copy(first, first + n_embd, cat);
      rms_norm(hidden + (t * hc + s) * n_embd, hnorm_, n_embd, eps, cat + n_embd);
    }
  }
  matmul_f32(eh_proj_, cat_.data(), static_cast<int>(T * hc), x, pool, act);
}

void MtpHead::output(const float* x, int T, int first_row, const HParams& hp, float* g, float* logits,
                     ThreadPool& pool, QuantizedRows& act) const {
  const int64_t n_embd = hp.n_embd;
  rms_norm_rows(x, norm_, T, n_embd, hp.rms_eps, g);
  if (T > first_row) matmul_f32(lm_, g + static_cast<int64_t>(first_row) * n_embd, T - first_row, logits, pool, act);
}

}  // namespace sluice::model
