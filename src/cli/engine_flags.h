// Registers the engine flags shared by `run`, `logits` and `eval` on a
// subcommand, writing into an EngineOptions the caller owns (it must outlive
// parsing and the callback). The routing-trim flags are among them; their
// environment fallbacks are applied when the command calls
// EngineOptions::to_model_config() (through o.resolve_trims).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/model_ref.h"
#include "cli/notice.h"
#include "cli/trim_flags.h"
#include "runtime/engine_options.h"

namespace sluice::cli {

// -m is in the command's main group (listed first in --help); the rest in
// the "Engine" group. Choices are CLI11 checks, so --help lists them and a
// wrong one is a usage error naming the flag.
inline void add_engine_flags(CLI::App* cmd, runtime::EngineOptions& o) {
  const char* group = "Engine";
  o.log = [](const std::string& line) { notice(line); };  // -q silences engine notices too
  cmd->add_option("-m,--model", o.model_path,
                  "GGUF model file (first split of a split model), or a model in ollama, the Hugging Face cache or "
                  "LM Studio (`sluice models` lists them)")
      ->required()
      ->transform(model_reference("-m", &o.model_name));
  cmd->add_option("-t,--threads", o.threads, "compute threads, 1 to 4 x online CPUs (results do not depend on it)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("-c,--ctx-size", o.n_ctx,
                  "context size in tokens (0: min(model context, 4096)); above the model's trained context warns")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--dense-weights", o.dense_weights,
                  "how non-expert weights are held: mmap (page cache), warm (mmap, read once), anon (private "
                  "copy; llama.cpp's --no-mmap)")
      ->check(CLI::IsMember({"mmap", "warm", "anon"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--resident-layout", o.resident_layout,
                  "layout of weights that stay in memory (anon dense weights, cached and --load-all experts): "
                  "packed (re-laid once for the packed kernels, where the type has them) or plain; same logits")
      ->check(CLI::IsMember({"packed", "plain"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--kv-type", o.kv_type, "KV cache element type (llama.cpp's -ctk/-ctv)")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--cache-mb", o.cache_mb, "expert cache budget in MiB: N|auto|off (0 = off)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--cache-floor-mb", o.cache_floor_mb, "--cache-mb auto: never below M MiB (0: mechanical floor)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--cache-ceil-mb", o.cache_ceil_mb, "--cache-mb auto: never above M MiB (0: every expert)")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--no-odirect", o.no_odirect, "read with the page cache instead of O_DIRECT")->group(group);
  cmd->add_option("--io-threads", o.io_threads, "expert read lanes")->capture_default_str()->group(group);
  cmd->add_flag("--load-all", o.load_all, "keep every expert resident (debug / small models)")->group(group);
  cmd->add_option("--route-trace", o.route_trace, "write expert routing + cache hits as JSONL to FILE")->group(group);
  cmd->add_option("--io-engine", o.io_engine,
                  "how expert reads are issued: pread (--io-threads blocking lanes) or uring (one io_uring with "
                  "--io-depth reads in flight)")
      ->capture_default_str()
      ->group(group);
  cmd->add_option("--io-depth", o.io_depth, "reads in flight with --io-engine uring")->capture_default_str()->group(group);
  cmd->add_option("--route-replay", o.route_replay,
                  "benchmark mode: replace the router's expert choices by a recorded routing trace (JSONL: "
                  "sluice, Mixtral or Qwen-MoE format), mapped onto the model's layers and experts")
      ->group(group);
  cmd->add_option("--ubatch", o.ubatch,
                  "positions per forward micro-batch in prefill (llama.cpp's -ub); each routed expert is read once "
                  "per layer per micro-batch (and --expert-budget applies per micro-batch)")
      ->capture_default_str()
      ->group(group);
  cmd->add_flag("--prefetch{auto}", o.prefetch,
                "--prefetch[=N|auto|prefill|off]: after each MoE layer's attention, predict the next layer's "
                "experts and start reading them while this layer computes; results unchanged; off by default. "
                "prefill: prompt micro-batches read every predicted expert of the next layer, decode none; it "
                "holds up to a second layer's union of experts in memory (two whole layers at a long prompt). N: "
                "each position's N most probable at every batch size (bare --prefetch: auto = half the top-k)")
      ->capture_default_str()
      ->group(group);
  const TrimFlags trim_flags = add_trim_flags(cmd, o.trims);
  o.resolve_trims = [trim_flags](moe::TrimConfig& cfg) { finalize_trim_flags(trim_flags, cfg); };
}

}  // namespace sluice::cli
