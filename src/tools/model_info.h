// A typed summary of a GGUF model for `sluice inspect`: hyperparameters,
// tokenizer, tensors, and the figures that size expert streaming.
//
// Sizing definitions (bytes; "expert tensors" are those whose name contains
// "_exps": stacked ones, whose last dimension is the expert index, or the
// per-expert tensors blk.L.ffn_*_exps.E.weight of an expert-major file, so both
// layouts give the same figures; see gguf/expert_layout.h):
//   dense_bytes      all other tensors (always resident)
//   expert_bytes     all expert tensors
//   per_expert[L]    bytes of one expert of layer L: sum over L's expert tensors of bytes / n_expert
//   token_demand     sum_L min(top_k, n_expert[L]) * per_expert[L]: the routed bytes one
//                    token touches (moe::token_demand_bytes)
//   layer_demand     max_L min(top_k, n_expert[L]) * per_expert[L]: the widest layer's routed
//                    bytes at decode (moe::cache_floor_bytes at ubatch 1)
//   kv_bytes         f16 KV rows for kv_context positions, computed by the engine's own
//                    rule (model::state_bytes over model::model_state_specs, the same
//                    call the model's allocation uses): per GQA layer
//                    kv_context * n_head_kv * (key_length + value_length) * 2, per MLA
//                    (deepseek2) layer kv_context * (kv_lora_rank + rope dims) * 2 (the
//                    latent row; no per-head K/V); the trunk's layers (an --mtp head adds
//                    one layer's rows). Unknown architectures: the first formula for
//                    every block. glm-dsa's full indexer layers add kv_context *
//                    indexer.key_length * 2 to their rows (the DSA indexer keys).
//                    deepseek4's layers keep per-position rows (raw kv, compressor
//                    inputs) for the window and the blocks being pooled (a ring, plus
//                    the --ubatch slack) and one row per completed compress block.
//   indexer_bytes    the part of kv_bytes that holds those indexer keys (0 without DSA)
//   compressed_bytes the part of kv_bytes that holds deepseek4's compressed blocks
//   recurrent_bytes  F32 recurrent state (conv taps and per-head matrices) of recurrent
//                    layers, independent of the context; 0 when there are none
//   not_loaded       tensors the architecture ignores (NextN/MTP blocks): in
//                    neither dense nor expert figures
//   scratch_bytes    decode-time activations, 4 bytes each:
//                    4 * (n_vocab + n_head * kv_context + 8 * n_embd + 3 * top_k * n_ff_expert)
//                    (n_ff_expert falls back to feed_forward_length for dense models)
//   decode_read      weight bytes one decode token reads from memory when everything is
//                    resident: dense - the token embedding table + one of its rows (only
//                    when a separate output.weight exists; a tied table is read whole by
//                    the output head) + token_demand. The numerator of the in-RAM decode
//                    roofline (`sluice bench --mem -m`); KV reads are not in it.
//   min_ram          dense + layer_demand + kv_bytes + recurrent_bytes + scratch_bytes
// Models without experts get zero expert figures; unknown architectures keep
// whatever keys exist (absent values are nullopt / 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace sluice::tools {

inline constexpr uint64_t kDefaultKvContext = 4096;

struct Hyperparameters {
  std::optional<uint64_t> block_count, context_length, embedding_length, feed_forward_length,
      expert_feed_forward_length, expert_count, expert_used_count, head_count, head_count_kv, key_length,
      value_length, vocab_size;
  std::optional<double> rope_freq_base, rope_scaling_factor, rms_eps;
  std::optional<std::string> rope_scaling_type;
  // Derived: key_length, else embedding_length / head_count (0 when unknown).
  uint64_t head_dim_k = 0, head_dim_v = 0;
};

struct TokenizerSummary {
  std::string model, pre;  // "" when absent
  uint64_t n_tokens = 0, n_merges = 0;
  std::optional<uint64_t> bos_id, eos_id;
};

struct TensorRow {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<uint64_t> ne;
  uint32_t split = 0;
  uint64_t offset = 0, bytes = 0;
};

struct LayerSizing {
  uint32_t layer = 0;
  uint64_t n_expert = 0;
  uint64_t expert_tensor_bytes = 0;  // all experts of this layer
  uint64_t per_expert_bytes = 0;     // one expert (gate + up + down slices)
};

struct Sizing {
  uint64_t dense_bytes = 0, expert_bytes = 0, total_bytes = 0;
  uint64_t top_k = 0;
  uint64_t token_demand_bytes = 0, layer_demand_bytes = 0;
  uint64_t decode_read_bytes = 0;
  uint64_t kv_context = kDefaultKvContext, kv_bytes = 0, scratch_bytes = 0, min_ram_bytes = 0;
  uint64_t recurrent_bytes = 0;
  uint64_t indexer_bytes = 0;  // of kv_bytes: the DSA indexer keys (glm-dsa, deepseek4), f16 like the rows
  uint64_t compressed_bytes = 0;  // of kv_bytes: deepseek4's compressed blocks
  uint64_t not_loaded_bytes = 0;  // tensors the architecture does not load (NextN/MTP blocks)
  std::string kv_layout = "per-head";  // "mla-latent" for MLA; "per-head" also when the arch is unknown
  std::vector<LayerSizing> layers;  // layers that have expert tensors, ascending
};

struct FileInfo {
  std::vector<std::string> paths;
  uint32_t version = 0;
  uint64_t alignment = 0, data_offset = 0, file_bytes = 0;  // file_bytes summed over splits
  uint64_t n_metadata = 0;
  std::optional<uint64_t> file_type;
  std::string name;  // general.name
  std::string expert_layout = "none";  // "none", "stacked" or "expert-major" (gguf::expert_layout_name)
};

struct ModelInfo {
  std::string architecture;  // "" when absent
  FileInfo file;
  Hyperparameters hp;
  TokenizerSummary tokenizer;
  std::vector<TensorRow> tensors;  // file order
  Sizing sizing;
  // Why `sluice run` would refuse this file (unsupported architecture, keys
  // or tensors that do not match it); empty when it loads. Sizing then falls
  // back to the generic rules above.
  std::string not_runnable;
  // Hybrid stacks (qwen35moe): which token mixer the trunk layers run, e.g.
  // "gated-deltanet x6, attention x2 (blk 3, 7)"; empty when every layer
  // runs the same kind.
  std::string layer_mixers;
};

// Never throws for missing keys; throws sluice::Error for keys of the wrong type.
// kv_context 0: the context `sluice run` would use without -c
// (model::resolve_context), so inspect's KV size is the one run allocates.
ModelInfo model_info(const gguf::GgufModel& model, uint64_t kv_context = kDefaultKvContext);

// llama.cpp's name for a general.file_type (llama_ftype) value: "Q4_K_M" for
// 15; "" for a value it does not define.
std::string file_type_name(uint64_t file_type);

}  // namespace sluice::tools
