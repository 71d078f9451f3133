// `sluice serve`: load the model once and answer OpenAI-compatible HTTP
// requests (server/server.h) until killed.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_progress.h"
#include "cli/sampler_flags.h"
#include "runtime/session.h"
#include "server/server.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct ServeOptions {
  runtime::EngineOptions engine;
  server::ServerConfig server;
  int64_t max_body_mb = 8;
};

void run_serve(ServeOptions& o) {
  check_sampler(o.server.defaults.sampler);
  if (o.server.defaults.max_tokens < -1) throw Error("-n: must be -1 (until the context is full) or >= 0");
  if (o.server.http_threads < 1 || o.server.http_threads > 1024) throw Error("--http-threads: must be 1..1024");
  if (o.max_body_mb < 1 || o.max_body_mb > 4096) throw Error("--max-body-mb: must be 1..4096");
  o.server.max_body_bytes = static_cast<size_t>(o.max_body_mb) << 20;
  if (o.server.model_id.empty()) o.server.model_id = std::filesystem::path(o.engine.model_path).filename().string();
  model::ModelConfig cfg = o.engine.to_model_config();
  cfg.on_dense_progress = tty_load_progress("sluice: loading dense weights");
  runtime::Session session = runtime::Session::open(o.engine.model_path, cfg);
  // The chat-template renderer is injected here (o.server.chat_renderer);
  // without one /v1/chat/completions answers 501.
  server::Server srv(session, o.server);
  const int port = srv.bind();
  std::printf("sluice: serving %s on http://%s:%d\n", o.server.model_id.c_str(), o.server.host.c_str(), port);
  std::fflush(stdout);
  if (!srv.run()) throw Error("serve: the listening socket failed");
  if (cfg.route_trace) cfg.route_trace->close();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (completions, chat, metrics)");
  add_engine_flags(cmd, opts->engine);
  cmd->add_option("--host", opts->server.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", opts->server.port, "port to listen on (0: any free port, printed)")->capture_default_str();
  cmd->add_option("--api-key", opts->server.api_key, "require 'Authorization: Bearer KEY' (all but /health)");
  cmd->add_option("--alias", opts->server.model_id, "model id in /v1/models and responses (default: file name)");
  cmd->add_option("-n,--n-predict", opts->server.defaults.max_tokens,
                  "max_tokens when a request gives none (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_option("--http-threads", opts->server.http_threads, "connections served at once")->capture_default_str();
  cmd->add_option("--max-body-mb", opts->max_body_mb, "largest request body in MiB (larger: 413)")
      ->capture_default_str();
  add_sampler_flags(cmd, opts->server.defaults.sampler);
  cmd->callback([opts] { run_serve(*opts); });
}

}  // namespace sluice::cli
