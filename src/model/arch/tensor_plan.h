// The generator half of an architecture declaration: which tensors and
// metadata keys a file of the architecture has, with their shapes as
// functions of the sizes (ArchSizes), exactly as llama.cpp writes them.
// Each arch/arch_<name>.cpp defines, next to its describe function, an
// ArchSynth (a plan function and its tiny sizes); registry.def names both.
// `sluice synth` (tools/synth.cpp) only fills the values: it asks the
// registered ArchSynth for the plan, so adding an architecture touches
// nothing in src/tools/.
//
// Contract: plan() takes sizes that passed the general range checks
// (tools::validate_synth_config) and throws sluice::Error naming the flag or
// field for a size its architecture cannot have; tensors are checked against
// their type's block size (PlanBuilder::add). Shapes are in ggml order
// ({row length, rows[, experts]}).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "util/ggml_type.h"

namespace sluice::model {

// What a synthetic file is made of: the sizes and the quantization mix. A
// preset (tools/synth_presets.cpp) only sets these.
struct ArchSizes {
  std::string arch = "qwen3moe";
  std::string name = "sluice-synth";
  uint32_t n_layer = 4;  // trunk blocks; n_nextn NextN/MTP blocks follow them
  uint32_t n_expert = 16;  // llama only: 0 writes a dense model (ffn_gate/up/down of n_ff)
  uint32_t n_expert_used = 4;
  uint32_t n_embd = 128;
  uint32_t n_ff_exp = 128;
  uint32_t n_ff = 384;  // feed_forward_length metadata (the model family's dense width); dense llama's FFN width
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 32;
  uint32_t n_vocab = 0;  // 0: follow the vocabulary
  uint32_t context_length = 4096;
  float rope_theta = 1e6f;
  float rms_eps = 1e-6f;
  // gpt-oss: sliding-window length of the even layers, YaRN factor and the
  // context it stretches.
  uint32_t n_swa = 128;
  float rope_scaling_factor = 32.0f;
  uint32_t rope_orig_ctx = 4096;
  // glm4moe / deepseek2 (DeepSeek-V3-style MoE). The first n_lead_dense blocks
  // have a dense FFN of n_ff; the others route sigmoid + exp_probs_b over
  // n_expert experts plus n_expert_shared always-on shared experts (width
  // n_ff_exp * n_expert_shared). --layers counts trunk blocks only; n_nextn
  // NextN/MTP blocks follow them (block_count = n_layer + n_nextn).
  uint32_t n_lead_dense = 1;
  uint32_t n_expert_shared = 1;
  uint32_t n_nextn = 0;
  float expert_weights_scale = 2.5f;
  bool expert_weights_norm = true;
  uint32_t n_group = 0, n_group_used = 0;  // deepseek2 expert groups (0: none)
  uint32_t n_rot = 0;                      // rope.dimension_count; 0 = head_dim (glm4moe, qwen35moe: partial RoPE)
  bool qk_norm = true;                     // glm4moe attn_q_norm / attn_k_norm
  // deepseek2 MLA: head_dim is key_length_mla (qk_nope + qk_rope), n_rot the
  // rope part (qk_rope), head_dim_v value_length_mla; q_lora_rank 0 writes
  // attn_q instead of attn_q_a/attn_q_a_norm/attn_q_b. YaRN when
  // rope_scaling_factor > 1 (with rope_orig_ctx and yarn_log_multiplier).
  uint32_t q_lora_rank = 64;
  uint32_t kv_lora_rank = 64;
  uint32_t head_dim_v = 32;
  float yarn_log_multiplier = 0.1f;
  // glm-dsa's DSA lightning indexer: heads, key width, top-k, and which trunk
  // blocks run it (block b is a full indexer block iff b % dsa_full_interval
  // == 0; the others reuse the selection of the full block below them).
  uint32_t dsa_n_head = 8;
  uint32_t dsa_head_dim = 64;
  uint32_t dsa_top_k = 16;
  uint32_t dsa_full_interval = 2;
  // deepseek4: each trunk block's compress ratio (0, 4 or 128; empty: 4, 128,
  // 0 repeating, the tiny shape), the output projection's groups and LoRA rank
  // (0: 2 groups of q_lora_rank / 2).
  std::vector<int32_t> dsv4_compress_ratios;
  uint32_t dsv4_o_groups = 0, dsv4_o_lora_rank = 0;
  // deepseek4: the first dsv4_hash_layers trunk blocks route by token id
  // (ffn_gate_tid2eid) instead of by score (exp_probs_b).
  uint32_t dsv4_hash_layers = 0;
  // qwen35moe (gated DeltaNet hybrid): the width of the sigmoid-gated shared
  // expert, the DeltaNet sizes (ssm.*: conv taps, key/value head dim, key
  // heads, value heads), the full-attention period and IMROPE's sections.
  uint32_t n_ff_shexp = 0;
  uint32_t ssm_conv_kernel = 4;
  uint32_t ssm_state_size = 32;
  uint32_t ssm_group_count = 2;
  uint32_t ssm_time_step_rank = 4;
  uint32_t full_attention_interval = 4;
  // lfm2moe: the attention blocks when they are not every
  // full_attention_interval-th (LFM2-8B-A1B's are 2, 6, 10, 14, 18, 21);
  // empty: the interval rule.
  std::vector<int32_t> attention_layers;
  std::vector<int32_t> rope_sections = {3, 3, 2, 0};
  // gemma4: layer il is full attention iff (il + 1) % swa_period == 0 (n_head_kv_full
  // KV heads of head_dim, K = V, proportional RoPE over a quarter of the pairs,
  // rope_theta), else sliding-window (n_swa) with n_head_kv heads of head_dim_swa
  // (rope_theta_swa); the dense MLP is n_ff wide; experts with a fused
  // ffn_gate_up_exps (fused_gate_up) or separate gate/up; logit softcap.
  uint32_t head_dim_swa = 64;
  uint32_t n_head_kv_full = 1;
  uint32_t swa_period = 6;
  float rope_theta_swa = 10000.0f;
  bool fused_gate_up = true;
  float logit_softcap = 30.0f;
  // llama-quantize's Q4_K_M rules (ffn_down* and attn_v Q6_K in the blocks
  // where use_more_bits(block, block_count) holds: the first and last eighth
  // and every third block between; the configured type elsewhere; plus the
  // architecture's own Q4_K_M rules, e.g. qwen35moe's attn_qkv Q5_K).
  bool q4_k_m_more_bits = false;
  GgmlType expert_type = GgmlType::Q4_0;  // ffn_{gate,up,down}_exps
  GgmlType down_type = GgmlType::Q4_0;    // ffn_down_exps
  GgmlType attn_type = GgmlType::Q8_0;    // attn_q, attn_k, attn_output (and the other dense matrices:
                                          // MLA and DeltaNet projections, dense and shared-expert FFNs,
                                          // NextN eh_proj)
  GgmlType attn_v_type = GgmlType::Q8_0;  // attn_v
  GgmlType embd_type = GgmlType::Q8_0;    // token_embd
  GgmlType output_type = GgmlType::Q8_0;  // output
};

// How a tensor's values are drawn (rows are ne[0] long).
enum class Init {
  Projection,  // N(0, 1/ne[0]): keeps activations O(1) (fan_in = row length)
  Norm,        // 1 + 0.05 N(0,1)
  Router,      // projection rows orthogonal to u, plus g_{layer,e} * u (skewed routing)
  Embedding,   // N(0,1) + sqrt(n_embd) * u: every token shares the direction u
  Bias,        // 0.1 N(0,1): biases and attention sinks, small next to O(1) activations
  Decay,       // -exp(U(ln 0.05, 0)): negative decay rates (DeltaNet ssm_a), so states shrink
  QuarterRope, // 1 for the first ne[0]/4 values, 1e30 after: RoPE frequency factors that rotate only
               // a quarter of the pairs (Gemma 4's "proportional" rope_freqs)
  ExpertIds,   // I32 only: ne[0] distinct expert ids in [0, n_expert) per row, drawn uniformly
               // (DeepSeek V4's ffn_gate_tid2eid: row t = the experts of token id t)
};

struct PlannedTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;
  Init init = Init::Projection;
  uint32_t layer = 0;
  bool direct = false;  // bytes from generate_direct_row instead of quantizing floats
};

struct SynthPlan {
  std::vector<std::pair<std::string, gguf::Value>> metadata;
  std::vector<PlannedTensor> tensors;
};

// The tokenizer.* entries a plan gets (the caller's vocabulary, padded to
// ArchSizes::n_vocab); sets *n_vocab to the token count.
using VocabSource = std::function<std::vector<std::pair<std::string, gguf::Value>>(uint32_t* n_vocab)>;

// Builds a plan: metadata in insertion order, tensors checked against their
// type's block size (the message names `flag`, the option that sets the type
// or width).
class PlanBuilder {
 public:
  // `builtin_vocab` says whether `vocab` is the built-in vocabulary (whose
  // tokenizer.ggml.pre an architecture may replace).
  PlanBuilder(VocabSource vocab, bool builtin_vocab) : vocab_(std::move(vocab)), builtin_vocab_(builtin_vocab) {}

  void md(std::string key, gguf::Value v) { plan_.metadata.emplace_back(std::move(key), std::move(v)); }
  void add(std::string name, GgmlType type, std::vector<uint64_t> ne, Init init, uint32_t layer, const char* flag);
  // general.architecture/type/name (first, as llama.cpp writes them).
  void general(const ArchSizes& cfg);
  // general.file_type for cfg.expert_type and general.quantization_version.
  void file_type(const ArchSizes& cfg);
  // tokenizer.* from the vocabulary source; returns the vocabulary size.
  // `builtin_pre` (non-null) replaces tokenizer.ggml.pre of the built-in
  // vocabulary (a --vocab file keeps its own).
  uint32_t tokenizer(const char* builtin_pre = nullptr);
  // Orders the tensors as llama-quantize writes them (and so every published
  // quantized GGUF): tensors outside blk.N first, then block by block, each
  // group by name (checked against shared/golden/deepseek2-q4_k.gguf and
  // glm4moe-q8_0.gguf).
  void sort_as_quantized();
  SynthPlan take() { return std::move(plan_); }

 private:
  VocabSource vocab_;
  bool builtin_vocab_;
  SynthPlan plan_;
};

// One architecture's generator: its plan and the sizes of its "tiny" preset
// (a few MB; applied to the ArchSizes defaults).
struct ArchSynth {
  void (*plan)(const ArchSizes& cfg, PlanBuilder& p);
  void (*tiny)(ArchSizes& cfg);
};

// ---- pieces several architectures share (plan_blocks.cpp) ----------------------

// Refuses cfg.n_nextn > 0 for an architecture whose files carry no NextN/MTP blocks.
void reject_nextn(const ArchSizes& cfg);
// llama-quantize's type for a k-quant whose rows are not a multiple of 256
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; others unchanged).
GgmlType quantize_fallback(GgmlType t, uint64_t row_len);
// The type of an ffn_down* or attn_v matrix (rows of row_len) that is number
// `index` of `count` such tensors: `t`, or Q6_K where cfg.q4_k_m_more_bits and
// llama-quantize's use_more_bits(index, count) say so; then quantize_fallback.
GgmlType more_bits_type(const ArchSizes& cfg, GgmlType t, uint32_t index, uint32_t count, uint64_t row_len);
// DeepSeek-V3-style MoE (glm4moe, deepseek2). The MoE keys: expert counts and
// widths, leading dense blocks, sigmoid gating, weight norm/scale, shared
// experts and (when cfg.n_nextn > 0) nextn_predict_layers.
void add_moe_metadata(PlanBuilder& p, const ArchSizes& cfg);
// expert_group_count / expert_group_used_count when cfg.n_group > 0 (fails
// naming --experts unless the used groups hold at least n_expert_used experts).
void add_expert_groups(PlanBuilder& p, const ArchSizes& cfg);
// The FFN tensors of block `block` (prefix b, "blk.N."): dense ffn_{gate,up,down}
// of cfg.n_ff below cfg.n_lead_dense, else ffn_gate_inp, exp_probs_b, stacked
// experts and the shared expert.
void add_moe_ffn(PlanBuilder& p, const ArchSizes& cfg, const std::string& b, uint32_t block, uint32_t n_blocks);
// A NextN/MTP block's own tensors (its attention and FFN are added as for any
// block): nextn.eh_proj {2 n_embd, n_embd}, enorm, hnorm, the head norm
// (`head_norm`.weight, NextnDesc's) and, with own_head, nextn.embed_tokens and
// nextn.shared_head_head {n_embd, n_vocab}.
void add_nextn(PlanBuilder& p, const ArchSizes& cfg, const std::string& b, uint32_t block, uint64_t n_vocab,
               bool own_head, const std::string& head_norm = "nextn.shared_head_norm");

// The generator registered for general.architecture `arch`; nullptr if none.
const ArchSynth* find_arch_synth(const std::string& arch);
// The architectures that have a generator, in registry.def order.
std::vector<std::string> synth_architectures();

}  // namespace sluice::model
