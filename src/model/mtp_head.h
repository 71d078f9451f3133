// The NextN/MTP head (ArchDesc's NextnDesc; --mtp): one extra transformer
// block, loaded as block n_layer, that drafts the token after next from the
// trunk's hidden state h and the next token t:
//   x = eh_proj . [RMSNorm(embed(t)) * enorm, RMSNorm(h) * hnorm]
//   g = norm(block(x)),  logits = lm . g
// where embed is nextn.embed_tokens or token_embd, norm shared_head_norm or
// output_norm, lm shared_head_head or output. The block's mixer keeps its own
// one-layer model state (`state`), appended by mtp_eval and rolled back by
// mtp_truncate (KV rows: exact). The block itself runs through the trunk's
// forward_layer (Transformer, transformer_mtp.cpp); this class holds what is
// the head's alone: its inputs, its outputs and its state.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/arch.h"
#include "model/binder.h"
#include "model/hparams.h"
#include "model/matmul.h"
#include "model/state/model_state.h"
#include "model/thread_pool.h"

namespace sluice::model {

class MtpHead {
 public:
  // Binds blk.<head.layer>.nextn.* and the head norm head.head_norm (the
  // block's own tensors are bound by the caller); the trunk's token_embd /
  // output_norm / output stand in for the optional ones.
  void bind(Binder& b, const NextnDesc& head, const HParams& hp, const moe::DenseWeights& dense,
            const gguf::TensorInfo* token_embd, const float* output_norm, const WeightMatrix& output);

  // x = eh_proj . [norm(embed(tokens[t])) * enorm, norm(hidden[t]) * hnorm]:
  // T rows of n_embd; with hp.dsv4.hc_count = hc streams, hidden and x are
  // T rows of hc x n_embd and each stream s gets eh_proj . [the same embedding
  // half, norm(hidden[t] stream s) * hnorm] (llama.cpp's deepseek4 MTP graph).
  void input(std::span<const int32_t> tokens, const float* hidden, const HParams& hp, float* x, ThreadPool& pool,
             QuantizedRows& act);
  // g (T rows of n_embd) = norm(x); logits of rows [first_row, T) = lm . g.
  void output(const float* x, int T, int first_row, const HParams& hp, float* g, float* logits, ThreadPool& pool,
              QuantizedRows& act) const;

  std::unique_ptr<ModelState> state;  // the head's one block (null: no head loaded)

 private:
  const gguf::TensorInfo* embd_ = nullptr;  // nextn.embed_tokens or token_embd
  const uint8_t* embd_data_ = nullptr;
  const float* enorm_ = nullptr;
  const float* hnorm_ = nullptr;
  const float* norm_ = nullptr;  // shared_head_norm or output_norm
  WeightMatrix eh_proj_;         // 2 n_embd -> n_embd
  WeightMatrix lm_;              // shared_head_head or output
  std::vector<float> cat_;       // [T][2 n_embd]
};

}  // namespace sluice::model
