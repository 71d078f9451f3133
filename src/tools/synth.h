// `sluice synth`: writes architecture-faithful random-weight GGUF models, from
// a few MB (unit tests) to full size (a Qwen3-30B-A3B-shaped ~17 GB file), so
// streaming can be exercised without downloading real checkpoints.
//
// Output contract: tensor names, shapes (ggml order), types and metadata keys
// are exactly those llama.cpp writes for the architecture; bytes are a pure
// function of the config (seed included) and never of the thread count.
// Memory stays bounded (a few chunks per thread) whatever the model size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/output_file.h"
#include "util/ggml_type.h"

namespace sluice::tools {

// How quantized matrices get their bytes.
//  Exact: float weights are generated and quantized with the kernels' quantizer.
//  Direct: random codes/scales generated per block (synth_blocks.cpp), for every
//          matrix except token_embd (whose values carry the routing direction).
//  Auto: Direct for models over kDirectThresholdElements weights, else Exact.
enum class QuantMode { Auto, Exact, Direct };
inline constexpr uint64_t kDirectThresholdElements = 1ull << 30;

// Architectures synth writes (general.architecture names, as llama.cpp spells them).
std::vector<std::string> synth_arch_names();

struct SynthConfig {
  std::string arch = "qwen3moe";
  std::string name = "sluice-synth";
  uint32_t n_layer = 4;
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
  uint32_t n_rot = 0;                      // rope.dimension_count; 0 = head_dim (glm4moe: partial RoPE)
  bool qk_norm = true;                     // glm4moe attn_q_norm / attn_k_norm
  // deepseek2 MLA: head_dim is key_length_mla (qk_nope + qk_rope), n_rot the
  // rope part (qk_rope), head_dim_v value_length_mla; q_lora_rank 0 writes
  // attn_q instead of attn_q_a/attn_q_a_norm/attn_q_b. YaRN when
  // rope_scaling_factor > 1 (with rope_orig_ctx and yarn_log_multiplier).
  uint32_t q_lora_rank = 64;
  uint32_t kv_lora_rank = 64;
  uint32_t head_dim_v = 32;
  float yarn_log_multiplier = 0.1f;
  // llama-quantize's Q4_K_M rule for ffn_down* and attn_v (glm4moe): Q6_K in
  // the blocks where use_more_bits(block, block_count) holds (the first and
  // last eighth and every third block between), the configured type elsewhere.
  bool q4_k_m_more_bits = false;
  GgmlType expert_type = GgmlType::Q4_0;  // ffn_{gate,up,down}_exps
  GgmlType down_type = GgmlType::Q4_0;    // ffn_down_exps
  GgmlType attn_type = GgmlType::Q8_0;    // attn_q, attn_k, attn_output (and the other dense matrices:
                                          // MLA projections, dense and shared-expert FFNs, NextN eh_proj)
  GgmlType attn_v_type = GgmlType::Q8_0;  // attn_v
  GgmlType embd_type = GgmlType::Q8_0;    // token_embd
  GgmlType output_type = GgmlType::Q8_0;  // output
  uint64_t seed = 42;
  std::string vocab_path;  // "" = built-in byte-level BPE vocab
  QuantMode quant_mode = QuantMode::Auto;
  // Routing skew: spread of the per-expert affinity to the shared residual
  // direction (0 gives near-uniform routing).
  float routing_skew = 1.5f;
  // Real-model presets: their layer count; --layers may only cut it (1..this).
  // 0: no preset bound (only the general limit).
  uint32_t preset_layers = 0;
  // Header and tensor table only: the data section is a hole of zeros (the
  // file has its full size but takes almost no disk), for sizing/inspect
  // experiments with full-size tensor tables.
  bool zero_data = false;
};

// Presets: "tiny" (a few MB, Q4_0 experts / Q8_0 rest, built-in vocab; for
// gpt-oss MXFP4 experts), "qwen3-30b-a3b" (Qwen3-30B-A3B shapes, Q4_K_M-like
// types, ~17 GB), "gpt-oss-20b" / "gpt-oss-120b" (the real shapes and types of
// ggml-org's MXFP4 GGUFs, ~12 / ~63 GB), "deepseek-v3", "kimi-k2" (deepseek2)
// and "glm-4.5-air" (glm4moe) with Q4_K_M mixes (synth_config.cpp says which
// files they model). `arch` ("" = the preset's own):
// "tiny" takes any architecture; the real-model presets imply theirs and
// reject another. Throws sluice::Error naming the flag if unknown/conflicting.
SynthConfig synth_preset(const std::string& preset, const std::string& arch = "");
std::vector<std::string> synth_preset_names();

// Range checks of every shape flag (message names the flag and its limit).
// Runs before anything is allocated; synth_model calls it.
void validate_synth_config(const SynthConfig& cfg);

// Free bytes for an unprivileged writer in the directory that will hold `out_path`.
uint64_t free_disk_bytes(const std::string& out_path);
// Throws sluice::Error naming `out_path` with both sizes when `need` > `free`
// (plus the --layers count that would fit, when fixed_bytes + L * per_layer_bytes
// fits for some L >= 1).
void check_disk_space(const std::string& out_path, uint64_t need, uint64_t free, uint64_t fixed_bytes,
                      uint64_t per_layer_bytes);

struct SynthProgress {
  bool print = false;  // progress lines (MB/s) to stderr
};

struct SynthResult {
  uint64_t bytes = 0;  // file size
  uint64_t n_tensors = 0;
  double seconds = 0;
  bool direct = false;  // whether direct block generation was used
  uint64_t buffer_bytes = 0;  // chunk buffers + scratch of all workers (bounded up front)
};

// What a config will write, computed before anything is opened or allocated.
struct SynthSizes {
  uint64_t file_bytes = 0;       // exact size of the output file
  uint64_t header_bytes = 0;     // metadata + tensor table, padded (where the data starts)
  uint64_t fixed_bytes = 0;      // header + tensors outside blk.N
  uint64_t per_layer_bytes = 0;  // one block's tensors (all blocks are equal), with padding
  uint64_t buffer_bytes = 0;     // workers' chunk buffers and scratch for `threads` workers
};
SynthSizes synth_sizes(const SynthConfig& cfg, unsigned threads);

// Writes the model into `out` using `threads` worker threads (0 = all cores)
// and commits it when complete. Before writing it validates the config,
// computes synth_sizes and refuses (check_disk_space) when the file does not
// fit the destination's free space. Throws sluice::Error naming the flag/file
// on invalid config, I/O failure or a failed worker (e.g. out of memory);
// `out`'s destination is then untouched.
SynthResult synth_model(const SynthConfig& cfg, io::OutputFile& out, unsigned threads,
                        const SynthProgress& progress = {});
// The same into io::OutputFile(out_path) that keeps cfg.vocab_path safe and
// replaces an existing file (tests; the CLI refuses one without --force).
SynthResult synth_model(const SynthConfig& cfg, const std::string& out_path, unsigned threads,
                        const SynthProgress& progress = {});

// ---- pieces shared by synth_*.cpp (exposed for tests) -------------------------

// The tokenizer.* metadata: from cfg.vocab_path or built in; padded with
// "<|extra_N|>" (UNUSED) tokens to n_vocab when n_vocab > its size (0 = as is).
// Returns the entries and sets *vocab_size to the final token count.
std::vector<std::pair<std::string, gguf::Value>> synth_vocab(const std::string& vocab_path, uint32_t n_vocab,
                                                             uint32_t* vocab_size);

// The built-in vocabulary: 256 byte tokens (GPT-2 byte-to-unicode form), merges
// learnt on a small built-in English text, then the control tokens.
struct BuiltinVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 3 control
  std::vector<std::string> merges;
  uint32_t bos = 0, eos = 0, pad = 0;
};
const BuiltinVocab& builtin_vocab();

}  // namespace sluice::tools
