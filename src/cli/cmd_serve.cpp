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
#include "model/model.h"
#include "runtime/chat.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "server/limits.h"
#include "server/server.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct ServeOptions {
  runtime::EngineOptions engine;
  server::ServerConfig server;
  SamplerFlags sampling;  // request defaults; -s -1 (default): a random seed per request
  int64_t max_body_mb = static_cast<int64_t>(server::kDefaultMaxBodyBytes >> 20);
  int parallel = 4;  // sequence slots
  int64_t state_mb = 0;  // --state-mb: the slots' state budget (0: --parallel slots' worth)
};

void run_serve(ServeOptions& o) {
  check_sampler(o.sampling);
  o.server.defaults.sampler = o.sampling.cfg;
  o.server.defaults.random_seed = o.sampling.seed < 0;  // -s -1: each request draws its own
  if (o.sampling.seed >= 0) o.server.defaults.sampler.seed = static_cast<uint64_t>(o.sampling.seed);
  if (o.server.defaults.max_tokens < -1) throw Error("-n: must be -1 (until the context is full) or >= 0");
  if (o.server.http_threads < 1 || o.server.http_threads > 1024) throw Error("--http-threads: must be 1..1024");
  if (o.max_body_mb < 1 || o.max_body_mb > 4096) throw Error("--max-body-mb: must be 1..4096");
  o.server.max_body_bytes = static_cast<size_t>(o.max_body_mb) << 20;
  if (o.parallel < 1 || o.parallel > model::kMaxSlots)
    throw Error("--parallel: must be 1.." + std::to_string(model::kMaxSlots) + " (got " + std::to_string(o.parallel) +
                ")");
  if (o.server.max_queue < 0 || o.server.max_queue > 100000) throw Error("--max-queue: must be 0..100000");
  if (o.state_mb < 0 || o.state_mb > (int64_t{1} << 30))
    throw Error("--state-mb: must be 0..1073741824 MiB (0: --parallel slots' worth; got " + std::to_string(o.state_mb) +
                ")");
  if (!o.server.slot_save_path.empty() && !std::filesystem::is_directory(o.server.slot_save_path))
    throw Error("--slot-save-path: " + o.server.slot_save_path + " is not a directory");
  // A stored model's id is the name it was asked for ("qwen3:30b-a3b"), not its blob's file name.
  if (o.server.model_id.empty())
    o.server.model_id = !o.engine.model_name.empty() && o.engine.model_name != o.engine.model_path
                            ? o.engine.model_name
                            : std::filesystem::path(o.engine.model_path).filename().string();
  model::ModelConfig cfg = o.engine.to_model_config();
  cfg.n_slots = o.parallel;
  cfg.lazy_slots = true;  // a slot's state is allocated when a request runs in it (server/slot_memory.h)
  cfg.slot_state_budget = static_cast<uint64_t>(o.state_mb) << 20;
  cfg.on_dense_progress = tty_load_progress("sluice: loading dense weights");
  runtime::Session session = runtime::Session::open(o.engine.model_path, cfg);
  // The model's chat template renders /v1/chat/completions (the plain
  // User:/Assistant: format when the file has none).
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(session.gguf().metadata());
  // A template's raise_exception rejects the conversation: the client's error (400).
  o.server.chat_renderer = [render = runtime::model_chat_renderer(session.gguf(), tok)](
                               const nlohmann::json& messages, const nlohmann::json& tools, bool add_gen) {
    try {
      return render(messages, tools, add_gen);
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind("chat template: raise_exception: ", 0) == 0) throw server::RequestError(what);
      throw;
    }
  };
  o.server.output_format = chat_output::output_format_for(
      session.gguf().architecture(), session.gguf().metadata().get_string("tokenizer.chat_template").value_or(""));
  server::Server srv(session, o.server);
  const model::StateBytes slot = session.model().slot_state_bytes();
  const uint64_t budget = session.model().slot_state_budget();
  std::fprintf(stderr,
               "sluice: %d slots (--parallel) x %.1f MiB of model state (-c %d), allocated as requests need them "
               "within %.1f MiB (--state-mb)\n",
               o.parallel, static_cast<double>(slot.total()) / (1024.0 * 1024.0), session.model().n_ctx(),
               static_cast<double>(budget) / (1024.0 * 1024.0));
  if (budget < slot.total())
    std::fprintf(stderr, "sluice: warning: --state-mb is below one slot's state: every generation request will be "
                         "answered 503; raise --state-mb or lower -c\n");
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
  cmd->add_option("--alias", opts->server.model_id, "model id in /v1/models and responses (default: file name, or the stored model's name)");
  cmd->add_option("-n,--n-predict", opts->server.defaults.max_tokens,
                  "max_tokens when a request gives none (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_option("--http-threads", opts->server.http_threads, "connections served at once")->capture_default_str();
  cmd->add_option("--max-body-mb", opts->max_body_mb, "largest request body in MiB, after decompression (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--parallel", opts->parallel,
                  "requests generated at once, batched: each step evaluates every active request together, so a MoE "
                  "layer reads each expert once for all of them. Each slot holds its own model state: the KV rows "
                  "of -c positions (and recurrent state) that `sluice inspect` reports as state bytes, checked "
                  "against memory like one. A slot's state is allocated when a request is scheduled onto it and "
                  "kept for prefix reuse while --state-mb allows")
      ->capture_default_str();
  cmd->add_option("--state-mb", opts->state_mb,
                  "memory in MiB the slots' model state may hold at once (0: --parallel slots' worth). It is "
                  "checked against memory at load and --cache-mb auto leaves it free. A request that finds it "
                  "full waits for a running request to end (an idle slot's cached state gives way first); when "
                  "nothing runs and it still cannot fit (below one slot's state) the request is answered 503")
      ->capture_default_str();
  cmd->add_option("--max-queue", opts->server.max_queue,
                  "requests that may wait for a slot; more are answered 429")
      ->capture_default_str();
  cmd->add_option("--slot-save-path", opts->server.slot_save_path,
                  "directory for POST /slots/{id}?action=save|restore slot files (the same format as "
                  "`sluice chat --save/--load`); without it those actions answer 501");
  add_sampler_flags(cmd, opts->sampling);
  cmd->callback([opts] { run_serve(*opts); });
}

}  // namespace sluice::cli
