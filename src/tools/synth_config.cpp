// synth's configuration: the range of every shape flag and size, and the
// free-space check of the destination.
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

}  // namespace

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
  in_range(cfg.n_nextn, 0, kMaxLayers, "--nextn");
  in_range(cfg.n_lead_dense, 0, kMaxLayers, "--layers");
  in_range(cfg.n_expert_shared, 0, kMaxExperts, "--experts");
  in_range(cfg.q_lora_rank, 0, kMaxWidth, "--n-embd");
  in_range(cfg.kv_lora_rank, 0, kMaxWidth, "--n-embd");
  in_range(cfg.head_dim_v, 0, kMaxHeadDim, "--head-dim");
  in_range(cfg.n_group, 0, kMaxExperts, "--experts");
  in_range(cfg.n_ff_shexp, 0, kMaxFfn, "--n-ff-exp");
  in_range(cfg.ssm_conv_kernel, 1, 64, "ssm.conv_kernel");
  in_range(cfg.ssm_state_size, 1, kMaxHeadDim, "ssm.state_size");
  in_range(cfg.ssm_group_count, 1, kMaxHeads, "ssm.group_count");
  in_range(cfg.ssm_time_step_rank, 1, kMaxHeads, "ssm.time_step_rank");
  in_range(cfg.full_attention_interval, 1, kMaxLayers, "full_attention_interval");
  in_range(cfg.rope_sections.size(), 3, 4, "rope.dimension_sections");
  for (int32_t v : cfg.rope_sections)
    if (v < 0 || v > static_cast<int32_t>(kMaxHeadDim))
      fail("rope.dimension_sections", "section " + std::to_string(v) + " is out of range 0.." +
                                          std::to_string(kMaxHeadDim));
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
