// Internal to synth: the list of tensors to write and how each is initialised.
// One file per architecture (synth_qwen3moe.cpp, synth_llama.cpp,
// synth_gpt_oss.cpp, synth_glm4moe.cpp, synth_deepseek2.cpp) turns a validated SynthConfig into a SynthPlan through
// PlanBuilder; synth.cpp streams the plan to disk through RowGenerator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "tools/synth.h"
#include "tools/synth_random.h"

namespace sluice::tools {

// How a tensor's values are drawn (rows are ne[0] long).
enum class Init {
  Projection,  // N(0, 1/ne[0]): keeps activations O(1) (fan_in = row length)
  Norm,        // 1 + 0.05 N(0,1)
  Router,      // projection rows orthogonal to u, plus g_{layer,e} * u (skewed routing)
  Embedding,   // N(0,1) + sqrt(n_embd) * u: every token shares the direction u
  Bias,        // 0.1 N(0,1): biases and attention sinks, small next to O(1) activations
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

// Builds a plan: metadata in insertion order, tensors checked against their
// type's block size (the message names `flag`, the option that sets the type
// or width).
class PlanBuilder {
 public:
  void md(std::string key, gguf::Value v) { plan_.metadata.emplace_back(std::move(key), std::move(v)); }
  void add(std::string name, GgmlType type, std::vector<uint64_t> ne, Init init, uint32_t layer, const char* flag);
  // general.architecture/type/name (first, as llama.cpp writes them).
  void general(const SynthConfig& cfg);
  // general.file_type for cfg.expert_type and general.quantization_version.
  void file_type(const SynthConfig& cfg);
  // tokenizer.* from synth_vocab; returns the vocabulary size. `builtin_pre`
  // (non-null) replaces tokenizer.ggml.pre of the built-in vocabulary (a
  // --vocab file keeps its own).
  uint32_t tokenizer(const SynthConfig& cfg, const char* builtin_pre = nullptr);
  // Orders the tensors as llama-quantize writes them (and so every published
  // quantized GGUF): tensors outside blk.N first, then block by block, each
  // group by name (checked against shared/golden/deepseek2-q4_k.gguf and
  // glm4moe-q8_0.gguf).
  void sort_as_quantized();
  SynthPlan take() { return std::move(plan_); }

 private:
  SynthPlan plan_;
};

// Names and shapes as llama.cpp writes them for each architecture. cfg must
// have passed validate_synth_config; each adds the checks specific to it.
SynthPlan plan_qwen3moe(const SynthConfig& cfg);
SynthPlan plan_llama(const SynthConfig& cfg);
SynthPlan plan_gpt_oss(const SynthConfig& cfg);
SynthPlan plan_glm4moe(const SynthConfig& cfg);
SynthPlan plan_deepseek2(const SynthConfig& cfg);

// ---- DeepSeek-V3-style MoE pieces shared by glm4moe and deepseek2 (synth_moe_ffn.cpp)

// llama-quantize's type for a k-quant whose rows are not a multiple of 256
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; others unchanged).
GgmlType quantize_fallback(GgmlType t, uint64_t row_len);
// `t` for an ffn_down* or attn_v matrix of `block` of `n_blocks`, or Q6_K where
// cfg.q4_k_m_more_bits and llama-quantize's use_more_bits(block, n_blocks) say so.
GgmlType more_bits_type(const SynthConfig& cfg, GgmlType t, uint32_t block, uint32_t n_blocks);
// The MoE keys: expert counts and widths, leading dense blocks, sigmoid gating,
// weight norm/scale, shared experts and (when cfg.n_nextn > 0) nextn_predict_layers.
void add_moe_metadata(PlanBuilder& p, const SynthConfig& cfg);
// The FFN tensors of block `block` (prefix b, "blk.N."): dense ffn_{gate,up,down}
// of cfg.n_ff below cfg.n_lead_dense, else ffn_gate_inp, exp_probs_b, stacked
// experts and the shared expert.
void add_moe_ffn(PlanBuilder& p, const SynthConfig& cfg, const std::string& b, uint32_t block, uint32_t n_blocks);
// A NextN/MTP block's own tensors (its attention and FFN are added as for any
// block): nextn.eh_proj {2 n_embd, n_embd}, enorm, hnorm, shared_head_norm and,
// with own_head, nextn.embed_tokens and nextn.shared_head_head {n_embd, n_vocab}.
void add_nextn(PlanBuilder& p, const SynthConfig& cfg, const std::string& b, uint32_t block, uint64_t n_vocab,
               bool own_head);

// Dispatches on cfg.arch (validates first).
SynthPlan synth_plan(const SynthConfig& cfg);

// Runs produce(i, buffer) for chunks 0..n_chunks-1 on `threads` workers and
// consume(i, buffer) on the calling thread in chunk order, with at most
// `slots` buffers in flight. Whatever a worker or consume throws (including
// std::bad_alloc) stops all workers, is joined, and is rethrown here as one
// sluice::Error (an Error as is, anything else wrapped with its what()).
void run_chunk_pipeline(size_t n_chunks, unsigned threads, size_t slots,
                        const std::function<void(size_t, std::vector<uint8_t>&)>& produce,
                        const std::function<void(size_t, std::vector<uint8_t>&)>& consume);

// Generates rows of planned tensors. Immutable after construction: safe to
// call from several threads. Row r of tensor t is a function of (seed, t.name, r).
class RowGenerator {
 public:
  RowGenerator(const SynthConfig& cfg, uint32_t n_embd, uint32_t n_layer, uint32_t n_expert);
  // Writes row `row` of t (ne[0] values) into dst as t.type bytes. `scratch`
  // must hold ne[0] floats (unused for direct rows).
  void row(const PlannedTensor& t, uint64_t row, void* dst, float* scratch) const;
  // Float values of one row (exact path), exposed for tests.
  void float_row(const PlannedTensor& t, uint64_t row, float* out) const;

  const std::vector<float>& shared_direction() const { return u_; }
  // Per-expert router affinity to u for a layer (the logit offset it gives).
  float router_affinity(uint32_t layer, uint32_t expert) const { return affinity_[layer * n_expert_ + expert]; }

 private:
  uint64_t seed_;
  uint32_t n_embd_, n_expert_;
  std::vector<float> u_;         // unit vector, n_embd
  std::vector<float> affinity_;  // n_layer * n_expert: logit offsets s_{l,e}
};

}  // namespace sluice::tools
