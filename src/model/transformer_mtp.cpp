// Transformer's NextN/MTP head (--mtp; mtp_head.h): the head's block bound
// as block n_layer, mtp_eval's micro-batches through forward_layer on the
// head's own state, and its rollback.
#include <algorithm>
#include <chrono>
#include <string>

#include "model/transformer.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::model {

void Transformer::bind_mtp_head(Binder& b, const std::vector<gguf::LayerExpertParts>& experts) {
  const uint32_t il = static_cast<uint32_t>(mtp_layer_);
  bind_layer(b, il, desc_.nextn.front().block, experts);
  mtp_.bind(b, desc_.nextn.front(), hp_, *dense_, token_embd_, output_norm_, output_);
}

void Transformer::mtp_truncate(int n) {
  if (!mtp_.state) throw Error("mtp_truncate: the model was loaded without its MTP head (--mtp)");
  mtp_.state->truncate(n);  // KV rows only: exact
}

void Transformer::mtp_eval(std::span<const int32_t> tokens, const float* hidden, int pos0, float* logits_out,
                           float* g_out, bool all_rows) {
  if (mtp_layer_ < 0) throw Error("mtp_eval: the model was loaded without its MTP head (--mtp)");
  const int T = static_cast<int>(tokens.size());
  if (T == 0) return;
  const auto t_eval = std::chrono::steady_clock::now();
  check_eval(tokens, pos0, *mtp_.state, "mtp_eval");
  const int64_t n_vocab = hp_.n_vocab, W = mtp_hidden_width();
  const int S = cfg_.ubatch;
  try {
    for (int c0 = 0; c0 < T; c0 += S) {
      const int n = std::min(S, T - c0);
      const bool last = c0 + n == T;
      const int first_row = all_rows ? 0 : (last ? n - 1 : n);
      float* logits = all_rows ? logits_out + c0 * n_vocab : logits_out;
      mtp_ubatch(tokens.subspan(c0, n), hidden + c0 * W, pos0 + c0, first_row, logits,
                 g_out ? g_out + c0 * W : nullptr);
    }
  } catch (...) {
    mtp_.state->abort_append();
    if (mtp_.state->n_past() > pos0) mtp_.state->truncate(pos0);
    eval_s_ += seconds_since(t_eval);
    throw;
  }
  eval_s_ += seconds_since(t_eval);
}

void Transformer::mtp_ubatch(std::span<const int32_t> tokens, const float* hidden, int pos0, int first_row,
                             float* logits_out, float* g_out) {
  const int T = static_cast<int>(tokens.size());
  x_.resize(static_cast<size_t>(T * x_width()));
  xn_.resize(x_.size());
  tmp_.resize(x_.size());
  mtp_.input(tokens, hidden, hp_, x_.data(), pool_, act_);
  mtp_.state->begin_append(T);
  const RowSegment seg{0, T, pos0, mtp_.state.get()};
  forward_layer(mtp_layer_, T, {&seg, 1}, 0);
  prefetch_.reset();
  mtp_.state->commit_append();
  if (hp_.dsv4.hc_count > 0) {
    // deepseek4: the chained hidden is the block's streams; the draft logits
    // come from them mixed by the trunk's hyper-connection head, then the
    // head's norm and lm (llama.cpp's MTP graph).
    if (g_out) std::copy(x_.begin(), x_.begin() + static_cast<std::ptrdiff_t>(T * x_width()), g_out);
    hc_head_rows(x_.data(), T, xn_.data());
    mtp_.output(xn_.data(), T, first_row, hp_, tmp_.data(), logits_out, pool_, act_);
    return;
  }
  mtp_.output(x_.data(), T, first_row, hp_, g_out ? g_out : xn_.data(), logits_out, pool_, act_);
}

}  // namespace sluice::model
