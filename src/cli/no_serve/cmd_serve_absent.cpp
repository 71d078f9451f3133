// `sluice serve` in a build without the HTTP server (SLUICE_SERVE=OFF, e.g.
// the static phone build: Debian's cpp-httplib has no static library). The
// command stays in the list so a user learns why it does not run.
#include "cli/commands.h"
#include "util/error.h"

namespace sluice::cli {

void register_serve(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (not in this build)");
  cmd->allow_extras();
  cmd->callback([] {
    throw Error("sluice serve: this build has no HTTP server (built with SLUICE_SERVE=OFF; the static build "
                "leaves it out because Debian's cpp-httplib has no static library)");
  });
}

}  // namespace sluice::cli
