// synth's configuration: presets per architecture, the range of every shape
// flag, and the free-space check of the destination.
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "tools/synth.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// Upper bounds of the shape flags. They are far above any real model (the
// widest MoE today has n_embd 7168) and keep every single row, chunk and
// scratch buffer in the MB range, so nothing is allocated from an absurd flag.
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxExperts = 4096;
constexpr uint32_t kMaxWidth = 65536;     // --n-embd
constexpr uint32_t kMaxFfn = 262144;      // --n-ff, --n-ff-exp
constexpr uint32_t kMaxHeads = 1024;      // --heads
constexpr uint32_t kMaxHeadDim = 1024;    // --head-dim
constexpr uint32_t kMaxVocab = 1u << 22;  // --vocab-size (4M tokens)

void in_range(uint64_t v, uint64_t lo, uint64_t hi, const char* flag) {
  if (v < lo || v > hi)
    fail(flag, std::to_string(v) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
}

std::string gib(uint64_t b) {
  char s[64];
  std::snprintf(s, sizeof s, "%.2f GiB (%llu bytes)", b / 1073741824.0, static_cast<unsigned long long>(b));
  return s;
}

SynthConfig tiny(const std::string& arch) {
  SynthConfig c;  // the defaults are the tiny qwen3moe model
  c.arch = arch;
  c.name = "sluice-synth-tiny";
  if (arch == "llama") {  // Mixtral-like MoE; --experts 0 makes it dense (FFN n_ff)
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.rms_eps = 1e-5f;
  } else if (arch == "gpt-oss") {
    c.n_ff = c.n_ff_exp;
    c.n_swa = 8;
    c.context_length = 131072;
    c.rope_theta = 150000.0f;
    c.rms_eps = 1e-5f;
    c.expert_type = c.down_type = GgmlType::MXFP4;
  }
  return c;
}

// gpt-oss-20b / -120b (openai/gpt-oss-* config.json). Types as ggml-org's
// gpt-oss-*-GGUF (mxfp4): MXFP4 experts; token_embd, output and attention
// Q8_0. No tensor listing of those files was found; a forum post reports
// Q8_0 embeddings, and Q8_0 for all three reproduces the tensor sizes
// llama-bench reports for them (59.02 GiB for 120b, 11.27 GiB for 20b; F16
// attention and embeddings would give ~61 GiB and ~13 GiB). F32 norms,
// biases, sinks and router, which llama-quantize never quantizes. (The golden
// gpt-oss file has F16 attention/embeddings instead: llama-quantize's F16
// override.)
SynthConfig gpt_oss(uint32_t n_layer, uint32_t n_expert, const char* name) {
  SynthConfig c;
  c.arch = "gpt-oss";
  c.name = name;
  c.n_layer = c.preset_layers = n_layer;
  c.n_expert = n_expert;
  c.n_expert_used = 4;
  c.n_embd = 2880;
  c.n_ff_exp = c.n_ff = 2880;
  c.n_head = 64;
  c.n_head_kv = 8;
  c.head_dim = 64;
  c.n_swa = 128;
  c.n_vocab = 201088;
  c.context_length = 131072;
  c.rope_theta = 150000.0f;
  c.rope_scaling_factor = 32.0f;
  c.rope_orig_ctx = 4096;
  c.rms_eps = 1e-5f;
  c.expert_type = c.down_type = GgmlType::MXFP4;
  c.attn_type = c.attn_v_type = c.embd_type = c.output_type = GgmlType::Q8_0;
  return c;
}

SynthConfig qwen3_30b_a3b() {
  SynthConfig c;
  c.name = "sluice-synth-qwen3-30b-a3b";
  c.n_layer = c.preset_layers = 48;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_embd = 2048;
  c.n_ff_exp = 768;
  c.n_ff = 6144;
  c.n_head = 32;
  c.n_head_kv = 4;
  c.head_dim = 128;
  c.n_vocab = 151936;
  c.context_length = 40960;
  c.rope_theta = 1e6f;
  c.rms_eps = 1e-6f;
  // Q4_K_M-like: Q4_K experts and q/k/o, Q6_K v and lm head, Q6_K embeddings.
  c.expert_type = GgmlType::Q4_K;
  c.down_type = GgmlType::Q4_K;
  c.attn_type = GgmlType::Q4_K;
  c.attn_v_type = GgmlType::Q6_K;
  c.embd_type = GgmlType::Q6_K;
  c.output_type = GgmlType::Q6_K;
  return c;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> synth_preset_names() { return {"tiny", "qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b"}; }

SynthConfig synth_preset(const std::string& preset, const std::string& arch) {
  if (!arch.empty()) {
    bool known = false;
    for (const auto& a : synth_arch_names()) known = known || a == arch;
    if (!known) fail("--arch", "unsupported architecture '" + arch + "' (supported: " + joined(synth_arch_names()) + ")");
  }
  if (preset == "tiny") return tiny(arch.empty() ? "qwen3moe" : arch);
  SynthConfig c;
  if (preset == "qwen3-30b-a3b") c = qwen3_30b_a3b();
  else if (preset == "gpt-oss-20b") c = gpt_oss(24, 32, "sluice-synth-gpt-oss-20b");
  else if (preset == "gpt-oss-120b") c = gpt_oss(36, 128, "sluice-synth-gpt-oss-120b");
  else fail("--preset", "unknown preset '" + preset + "' (available: " + joined(synth_preset_names()) + ")");
  if (!arch.empty() && arch != c.arch)
    fail("--arch", "preset " + preset + " is a " + c.arch + " model; it cannot be written as " + arch);
  return c;
}

void validate_synth_config(const SynthConfig& cfg) {
  if (cfg.preset_layers) {
    if (cfg.n_layer < 1 || cfg.n_layer > cfg.preset_layers)
      fail("--layers", std::to_string(cfg.n_layer) + " is out of range 1.." + std::to_string(cfg.preset_layers) +
                           " (the preset's layer count; --layers can only cut it)");
  } else {
    in_range(cfg.n_layer, 1, kMaxLayers, "--layers");
  }
  // Only llama has a dense form (0 experts); the plans of the others reject 0.
  in_range(cfg.n_expert, 0, kMaxExperts, "--experts");
  if (cfg.n_expert > 0) in_range(cfg.n_expert_used, 1, cfg.n_expert, "--experts-used");
  in_range(cfg.n_embd, 1, kMaxWidth, "--n-embd");
  in_range(cfg.n_ff_exp, 1, kMaxFfn, "--n-ff-exp");
  in_range(cfg.n_ff, 1, kMaxFfn, "--n-ff");
  in_range(cfg.n_head, 1, kMaxHeads, "--heads");
  in_range(cfg.n_head_kv, 1, cfg.n_head, "--kv-heads");
  if (cfg.n_head % cfg.n_head_kv != 0)
    fail("--kv-heads", std::to_string(cfg.n_head_kv) + " does not divide --heads " + std::to_string(cfg.n_head));
  in_range(cfg.head_dim, 2, kMaxHeadDim, "--head-dim");
  if (cfg.head_dim % 2 != 0) fail("--head-dim", std::to_string(cfg.head_dim) + " is odd (RoPE rotates pairs)");
  in_range(cfg.n_vocab, 0, kMaxVocab, "--vocab-size");
  in_range(cfg.context_length, 1, UINT32_MAX, "--context-length");
  in_range(cfg.n_swa, 1, cfg.context_length, "--sliding-window");
}

uint64_t free_disk_bytes(const std::string& out_path) {
  std::filesystem::path dir = std::filesystem::path(out_path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0)
    fail(out_path, "cannot query free space of " + dir.string() + ": " + std::strerror(errno));
  return uint64_t{st.f_bavail} * st.f_frsize;
}

void check_disk_space(const std::string& out_path, uint64_t need, uint64_t free, uint64_t fixed_bytes,
                      uint64_t per_layer_bytes) {
  if (need <= free) return;
  std::string msg = "the file needs " + gib(need) + " but its directory has " + gib(free) + " free";
  if (per_layer_bytes > 0 && fixed_bytes + per_layer_bytes <= free)
    msg += "; --layers " + std::to_string((free - fixed_bytes) / per_layer_bytes) + " would fit";
  fail(out_path, msg);
}

}  // namespace sluice::tools
