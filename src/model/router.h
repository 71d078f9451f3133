// Expert routing as llama.cpp's build_moe_ffn does it with softmax gating:
// probabilities = softmax over ALL expert logits; the k most probable experts
// are chosen (ties -> lower expert id); their probabilities are renormalised to
// sum to 1 (qwen3moe's norm_topk_prob, and Mixtral's softmax-over-top-k).
// Slot order is descending probability, and the MoE output is accumulated in
// this slot order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::model {

struct Routing {
  int n_tokens = 0;
  int k = 0;
  std::vector<int32_t> experts;  // [n_tokens][k]
  std::vector<float> weights;    // [n_tokens][k]

  int32_t expert(int t, int slot) const { return experts[static_cast<size_t>(t) * k + slot]; }
  float weight(int t, int slot) const { return weights[static_cast<size_t>(t) * k + slot]; }
};

// logits: n_tokens rows of n_expert router logits.
void route_softmax_topk(const float* logits, int n_tokens, int n_expert, int k, bool renormalize, Routing& out);

}  // namespace sluice::model
