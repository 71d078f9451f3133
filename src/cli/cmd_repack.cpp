// `sluice repack IN.gguf OUT.gguf [--force]`: rewrites a stacked-expert model
// into the expert-major layout (one 4 KiB-aligned extent per expert, so one
// expert is one read); see tools/repack.h.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/load_progress.h"
#include "tools/repack.h"

namespace sluice::cli {
namespace {

struct RepackCliOptions {
  std::string in, out;
  bool force = false;
};

void run_repack(const RepackCliOptions& o) {
  tools::RepackOptions opts;
  opts.force = o.force;
  opts.on_progress = tty_load_progress("repack");  // empty (silent) unless stderr is a TTY
  const tools::RepackResult r = tools::repack_expert_major(o.in, o.out, opts);
  std::fprintf(stderr,
               "repack: wrote %s (expert-major, one file): %llu tensors, %llu expert layers, %.1f MiB in %.1f s "
               "(%.1f MB/s)\n",
               o.out.c_str(), static_cast<unsigned long long>(r.n_tensors),
               static_cast<unsigned long long>(r.n_expert_layers), r.bytes_written / 1048576.0, r.seconds,
               r.seconds > 0 ? r.bytes_written / 1e6 / r.seconds : 0.0);
}

}  // namespace

void register_repack(CLI::App& app) {
  auto o = std::make_shared<RepackCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "repack", "Rewrite a model so each expert's gate, up and down are one 4 KiB-aligned extent (expert-major)");
  cmd->add_option("IN", o->in, "Input GGUF (stacked experts; may be split) or a stored model name")
      ->required()
      ->transform(model_reference("IN"));
  cmd->add_option("OUT", o->out, "Output GGUF (one file; written to a temporary file beside it, then renamed; never IN)")->required();
  cmd->add_flag("--force", o->force, "Overwrite OUT if it exists (never IN)");
  cmd->callback([o] { run_repack(*o); });
}

}  // namespace sluice::cli
