// Typed transformer hyperparameters, read from `<arch>.*` GGUF metadata by the
// architecture's description (model/arch.h), which validates them against the
// tensors present so the model code can trust these numbers.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::model {

enum class RopeType { Norm, Neox };  // Norm: pairs (2i, 2i+1); Neox: pairs (i, i + n_rot/2)

// RoPE in ggml's formulation. Without YaRN (yarn_factor 0) pair j of a head is
// rotated by pos * theta^(-2j/n_rot). With YaRN (ggml's rope_yarn, as llama.cpp
// runs gpt-oss and DeepSeek): freq_scale = 1/yarn_factor, the angle blends the
// interpolated (freq_scale * angle) and extrapolated angle with a ramp over the
// correction dims of yarn_orig_ctx, beta_fast and beta_slow, scaled by
// ext_factor; cos and sin are multiplied by attn_factor * (1 + 0.1 ln(yarn_factor)).
struct RopeParams {
  RopeType type = RopeType::Norm;
  uint32_t n_rot = 0;   // rotated dims per head (<= head_dim); the rest pass through
  float theta = 10000.0f;
  float yarn_factor = 0.0f;   // rope.scaling.factor when rope.scaling.type = yarn; 0: no YaRN
  uint32_t yarn_orig_ctx = 0; // rope.scaling.original_context_length
  float ext_factor = 1.0f;    // llama.cpp's default for YaRN (not in the GGUF)
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;    // llama.cpp defaults (not in the GGUF)
  float beta_slow = 1.0f;
};

// Multi-head latent attention (DeepSeek-V2/V3, deepseek2 in GGUF), in the
// absorbed form llama.cpp runs: the KV cache holds, per position, the
// normalised compressed kv (kv_lora_rank) followed by the shared rotated key
// part (n_rot): the "one KV head" of width head_dim = kv_lora_rank + n_rot, and
// the values are its first kv_lora_rank dims (head_dim_v). Queries are
// absorbed through attn_k_b into the same space; outputs leave it through
// attn_v_b.
struct MlaParams {
  uint32_t q_lora_rank = 0;   // 0: no q LoRA (attn_q directly)
  uint32_t kv_lora_rank = 0;
  uint32_t qk_head_dim = 0;   // key_length_mla: per-head q = [nope, rope]
  uint32_t v_head_dim = 0;    // value_length_mla
  uint32_t nope_dim() const { return qk_head_dim - kv_rope_dim; }
  uint32_t kv_rope_dim = 0;   // rope.dimension_count
};

// Gated DeltaNet linear attention (qwen35moe's ssm.* keys; the token mixer is
// model/mixers/gated_deltanet.*): n_k key heads and n_v value heads of
// state_size dims, a causal depthwise conv of conv_kernel taps over the
// channels [q (n_k S) | k (n_k S) | v (n_v S)].
struct DeltaNetParams {
  uint32_t conv_kernel = 0;  // ssm.conv_kernel (K)
  uint32_t state_size = 0;   // ssm.state_size (S: key = value head dim)
  uint32_t n_k_heads = 0;    // ssm.group_count
  uint32_t n_v_heads = 0;    // ssm.time_step_rank (a multiple of n_k_heads)
  uint64_t channels() const { return (2ull * n_k_heads + n_v_heads) * state_size; }
  uint64_t inner() const { return uint64_t{n_v_heads} * state_size; }  // ssm.inner_size
  // Kimi Delta Attention (bailingmoe3; model/mixers/kda.h): n_k = n_v = the
  // head count, S = kda.head_dim, three convs (q, k, v) of inner() channels
  // each (so channels() is their sum), and kda.gate_lower_bound (< 0).
  float gate_lower_bound = 0.0f;
};

// DSA "lightning indexer" (glm-dsa; model/mixers/dsa_attention.h): per query
// the top_k past positions with the largest indexer score are the only keys
// the MLA attention sees. n_head heads of head_dim dims score each key.
struct DsaParams {
  uint32_t n_head = 0;    // attention.indexer.head_count
  uint32_t head_dim = 0;  // attention.indexer.key_length (the cached indexer key width)
  uint32_t top_k = 0;     // attention.indexer.top_k
};

// DeepSeek V4 (deepseek4; model/mixers/dsv4_attention.h, model/transformer_dsv4.cpp):
// hyper-connections (hc_count residual streams mixed by Sinkhorn-normalised
// matrices around every sublayer), the grouped low-rank output projection, the
// compressed-KV rope base, hash-routed leading layers. The indexer of ratio-4
// layers is HParams::dsa.
struct Dsv4Params {
  uint32_t hc_count = 0;          // hyper_connection.count (0: not deepseek4)
  uint32_t sinkhorn_iters = 0;    // hyper_connection.sinkhorn_iterations
  float hc_eps = 0.0f;            // hyper_connection.epsilon
  uint32_t q_lora_rank = 0;       // attention.q_lora_rank
  uint32_t o_groups = 0;          // attention.output_group_count
  uint32_t o_lora_rank = 0;       // attention.output_lora_rank
  uint32_t hash_layers = 0;       // hash_layer_count: layers [0, n) route by token id
  RopeParams compress_rope;       // compressed layers: compress_rope_freq_base + the file's YaRN
};

struct HParams {
  std::string arch;
  uint32_t n_embd = 0;
  uint32_t n_layer = 0;      // trunk layers the forward pass runs
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;     // key_length (q and k)
  uint32_t head_dim_v = 0;   // value_length
  uint32_t n_ff = 0;         // dense FFN hidden size (0 if none)
  uint32_t n_expert = 0;     // 0 = dense FFN
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;     // expert hidden size
  float rms_eps = 1e-5f;
  uint32_t n_ctx_train = 0;
  uint32_t n_vocab = 0;      // rows of token_embd
  RopeParams rope;
  // Attention logit scale; 0: 1/sqrt(head_dim).
  float attn_scale = 0.0f;
  bool mla = false;  // multi-head latent attention (mla_params)
  MlaParams mla_params;
  DeltaNetParams deltanet;  // set where any layer is AttentionKind::DeltaNet
  // Gemma 4: the input embedding is multiplied by embd_scale (0: not scaled),
  // and the logits are logit_softcap * tanh(logits / logit_softcap) (0: none).
  float embd_scale = 0.0f;
  float logit_softcap = 0.0f;
  DsaParams dsa;            // set where any layer has a DSA indexer (AttentionDesc::indexer)
  Dsv4Params dsv4;          // deepseek4

  bool is_moe() const { return n_expert > 0; }
  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t k_dim() const { return n_head_kv * head_dim; }
  uint32_t v_dim() const { return n_head_kv * head_dim_v; }
  // Value width the KV cache stores per position: 0 with MLA (the values are
  // the first head_dim_v dims of the cached key row).
  uint32_t kv_v_dim() const { return mla ? 0 : v_dim(); }
};

}  // namespace sluice::model
