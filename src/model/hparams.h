// Typed transformer hyperparameters read from `<arch>.*` GGUF metadata.
//
// from_gguf() validates everything the forward pass relies on (positive sizes,
// head counts that divide, expert counts that make sense, tensor-derived vocab
// size) and throws sluice::Error naming the file and the key on any problem, so
// the model code can trust these numbers without re-checking.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf.h"

namespace sluice::model {

enum class RopeType { Norm, Neox };  // Norm: pairs (2i, 2i+1); Neox: pairs (i, i + n_rot/2)

struct HParams {
  std::string arch;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;     // key_length (q and k)
  uint32_t head_dim_v = 0;   // value_length
  uint32_t n_ff = 0;         // dense FFN hidden size (0 if none)
  uint32_t n_expert = 0;     // 0 = dense FFN
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;     // expert hidden size
  uint32_t n_rot = 0;        // rope.dimension_count (<= head_dim)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  uint32_t n_ctx_train = 0;
  uint32_t n_vocab = 0;      // rows of token_embd
  RopeType rope_type = RopeType::Norm;

  bool is_moe() const { return n_expert > 0; }
  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t k_dim() const { return n_head_kv * head_dim; }
  uint32_t v_dim() const { return n_head_kv * head_dim_v; }

  // Reads and validates the hyperparameters of `model` for its architecture.
  static HParams from_gguf(const gguf::GgufModel& model);
};

}  // namespace sluice::model
