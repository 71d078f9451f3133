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
#include "model/arch/tensor_plan.h"
#include "util/ggml_type.h"

namespace sluice::tools {

// How quantized matrices get their bytes.
//  Exact: float weights are generated and quantized with the kernels' quantizer.
//  Direct: random codes/scales generated per block (synth_blocks.cpp), for every
//          matrix except token_embd (whose values carry the routing direction).
//  Auto: Direct for models over kDirectThresholdElements weights, else Exact.
enum class QuantMode { Auto, Exact, Direct };
inline constexpr uint64_t kDirectThresholdElements = 1ull << 30;

// Architectures synth writes (general.architecture names, as llama.cpp spells
// them): those registered with a generator (model/arch/registry.def).
std::vector<std::string> synth_arch_names();

// The sizes and quantization mix (model::ArchSizes, which the architecture's
// generator reads) plus how the values are made.
struct SynthConfig : model::ArchSizes {
  // Real-model presets: their layer count; --layers may only cut it (1..this).
  // 0: no preset bound (only the general limit).
  uint32_t preset_layers = 0;
  uint64_t seed = 42;
  std::string vocab_path;  // "" = built-in byte-level BPE vocab
  QuantMode quant_mode = QuantMode::Auto;
  // Routing skew: spread of the per-expert affinity to the shared residual
  // direction (0 gives near-uniform routing).
  float routing_skew = 1.5f;
  // Header and tensor table only: the data section is a hole of zeros (the
  // file has its full size but takes almost no disk), for sizing/inspect
  // experiments with full-size tensor tables.
  bool zero_data = false;
};

// Presets (sizes only; synth_presets.cpp): "tiny" (a few MB, the
// architecture's ArchSynth::tiny sizes, Q4_0 experts / Q8_0 rest unless the
// architecture says otherwise, built-in vocab), "qwen3-30b-a3b" (Qwen3-30B-A3B shapes, Q4_K_M-like
// types, ~17 GB), "gpt-oss-20b" / "gpt-oss-120b" (the real shapes and types of
// ggml-org's MXFP4 GGUFs, ~12 / ~63 GB), "deepseek-v3", "kimi-k2" (deepseek2)
// "glm-4.5-air" (glm4moe), "qwen3.6-35b-a3b" and "qwen3.5-397b-a17b"
// (qwen35moe, without the MTP block unless n_nextn is set) with Q4_K_M mixes
// (synth_presets.cpp says which files they model), "deepseek-v4-flash"
// (deepseek4, MXFP4 experts + Q8_0) and "glm-5" (glm-dsa, Q4_K_M; both in
// synth_presets_sparse.cpp), "gemma-4-26b-a4b" (gemma4), "lfm2-8b-a1b"
// (lfm2moe), "qwen2-57b-a14b" (qwen2moe) and "ling-3.0-tiny" (bailingmoe3),
// all Q4_K_M (synth_presets_more_families.cpp). `arch` ("" = the preset's own):
// "tiny" takes any architecture; the real-model presets imply theirs and
// reject another. Throws sluice::Error naming the flag if unknown/conflicting.
SynthConfig synth_preset(const std::string& preset, const std::string& arch = "");
// The real-model presets' Q4_K_M: the types llama-quantize gives each tensor
// (synth_presets.cpp lists the rules); tied_embeddings: the model has no
// output.weight, so token_embd takes the output's type.
void set_q4_k_m(SynthConfig& c, bool tied_embeddings = false);
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
  int64_t router_layer = -1;  // the first block with a router (ffn_gate_inp), -1 if none
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
