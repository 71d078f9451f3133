// `sluice inspect -m MODEL.gguf [--json] [--tensors] [-c N]` (the model may
// also come positionally): what a GGUF holds and how much memory streaming
// its experts needs, the KV cache sized at the context `run` would use.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "tools/inspect_report.h"
#include "tools/model_info.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::cli {
namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  bool tensors = false;
  int kv_context = 0;  // -c; 0: as run resolves it (model::resolve_context)
};

void run_inspect(const InspectOptions& o) {
  if (o.kv_context < 0) throw Error("-c: context size must be >= 0 (got " + std::to_string(o.kv_context) + ")");
  const gguf::GgufModel model = gguf::GgufModel::open(o.model);
  const tools::ModelInfo info = tools::model_info(model, static_cast<uint64_t>(o.kv_context));
  if (o.json) {
    outf("%s\n", json_text(tools::inspect_json(info, model.metadata()), 2).c_str());
  } else {
    out(tools::inspect_text(info, o.tensors));
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a GGUF model: hyperparameters, tensors, streaming sizes");
  CLI::Option* m = cmd->add_option("-m,--model", opts->model, "GGUF file (first split of a split model) or a stored model name")
                       ->transform(model_reference("-m"));
  CLI::Option* pos = cmd->add_option("model_file", opts->model, "the same, given positionally")
                         ->transform(model_reference("model_file"));
  m->excludes(pos);
  pos->excludes(m);
  cmd->add_flag("--json", opts->json, "Print one JSON object (always includes every tensor)");
  cmd->add_flag("--tensors", opts->tensors, "List every tensor instead of one line per family");
  cmd->add_option("-c,--ctx-size,--ctx", opts->kv_context,
                  "context the KV cache is sized for (0: what `sluice run` uses without -c: min(model context, 4096))")
      ->capture_default_str();
  cmd->footer("Examples:\n  sluice inspect -m model.gguf\n  sluice inspect -m model.gguf -c 32768 --json");
  cmd->callback([opts, m, pos] {
    if (m->count() == 0 && pos->count() == 0) throw CLI::RequiredError("-m,--model");
    run_inspect(*opts);
  });
}

}  // namespace sluice::cli
