// `sluice inspect MODEL.gguf [--json] [--tensors] [--ctx N]`: what a GGUF holds
// and how much memory streaming its experts needs.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "tools/inspect_report.h"
#include "tools/model_info.h"

namespace sluice::cli {
namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  bool tensors = false;
  uint64_t kv_context = tools::kDefaultKvContext;
};

void run_inspect(const InspectOptions& o) {
  const gguf::GgufModel model = gguf::GgufModel::open(o.model);
  const tools::ModelInfo info = tools::model_info(model, o.kv_context);
  if (o.json) {
    outf("%s\n", tools::inspect_json(info, model.metadata()).dump(2).c_str());
  } else {
    out(tools::inspect_text(info, o.tensors));
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a GGUF model: hyperparameters, tensors, streaming sizes");
  cmd->add_option("model", opts->model, "GGUF file (first split of a split model)")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object (always includes every tensor)");
  cmd->add_flag("--tensors", opts->tensors, "List every tensor instead of one line per family");
  cmd->add_option("--ctx", opts->kv_context, "Context length used to size the KV cache")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([opts] { run_inspect(*opts); });
}

}  // namespace sluice::cli
