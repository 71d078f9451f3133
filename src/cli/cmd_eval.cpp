// `sluice eval`: perplexity of a model over a text file, and — when any routing
// trim is set — the same windows through an untrimmed second instance of the
// model, so the quality price of the trims (KL, top-1 agreement, perplexity)
// sits next to their I/O savings (MiB and experts read per token).
//
// Design: two model instances sharing one GgufModel, rather than one model
// with trims toggled, so that each run has its own expert store (and cache)
// and its I/O figures are not flattered by the other's reads. The cost is a
// second copy of the dense weights and KV cache.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/stdout_output.h"
#include "io/text_input.h"
#include "model/arch.h"
#include "bench/eval.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::cli {
namespace {

struct EvalCmdOptions {
  runtime::EngineOptions engine;
  std::string text_path;
  int ctx = 0;              // 0: min(model context, 512)
  int64_t max_tokens = 0;   // 0: all
  bool json = false;  // --json: the result as one JSON object instead of the table
};

bool trims_set(const moe::TrimConfig& t) { return t.top_k > 0 || t.any_table_trim(); }

nlohmann::json side_json(const bench::EvalSide& s, int64_t n_scored, double ppl) {
  const double tok = s.tokens_evaluated > 0 ? static_cast<double>(s.tokens_evaluated) : 1.0;
  return {{"ppl", ppl},
          {"nll", n_scored > 0 ? s.nll_sum / static_cast<double>(n_scored) : 0.0},
          {"tokens_evaluated", s.tokens_evaluated},
          {"seconds", s.seconds},
          {"tokens_per_second", s.seconds > 0 ? static_cast<double>(s.tokens_evaluated) / s.seconds : 0.0},
          {"mib_read", static_cast<double>(s.bytes_read) / 1048576.0},
          {"mib_read_per_token", s.mib_per_token()},
          {"experts_read", s.experts_read},
          {"experts_read_per_token", s.experts_read_per_token()},
          {"experts_routed_per_token", static_cast<double>(s.trims.routed) / tok},
          {"experts_kept_per_token", static_cast<double>(s.trims.kept) / tok},
          {"experts_dropped_per_token", static_cast<double>(s.trims.dropped()) / tok},
          {"dropped_by_top_p", s.trims.dropped_by_top_p},
          {"dropped_by_budget", s.trims.dropped_by_budget},
          {"dropped_by_cold", s.trims.dropped_by_cold},
          {"positions_emptied", s.trims.positions_emptied}};
}

void print_table(const bench::EvalResult& r, const nlohmann::json& j) {
  const bool ref = r.has_reference;
  outf("eval: %d windows, %lld tokens scored\n", r.n_windows, static_cast<long long>(r.n_scored));
  outf("%-28s %14s %14s\n", "", ref ? "trimmed" : "model", ref ? "untrimmed" : "");
  auto row = [&](const char* name, const char* key, const char* fmt) {
    char a[32], b[32] = "";
    std::snprintf(a, sizeof a, fmt, j["model"][key].get<double>());
    if (ref) std::snprintf(b, sizeof b, fmt, j["reference"][key].get<double>());
    outf("%-28s %14s %14s\n", name, a, b);
  };
  row("perplexity", "ppl", "%.4f");
  row("mean NLL (nats)", "nll", "%.5f");
  row("MiB read / token", "mib_read_per_token", "%.4f");
  row("experts read / token", "experts_read_per_token", "%.3f");
  row("experts routed / token", "experts_routed_per_token", "%.3f");
  row("experts kept / token", "experts_kept_per_token", "%.3f");
  row("experts dropped / token", "experts_dropped_per_token", "%.3f");
  row("tokens / s", "tokens_per_second", "%.1f");
  if (ref) {
    outf("%-28s %14.6f\n", "mean KL(untrimmed||trimmed)", r.mean_kl());
    outf("%-28s %13.2f%%\n", "top-1 agreement", r.top1_agree_pct());
  }
}

void run_eval(EvalCmdOptions& o) {
  o.engine.extra_inputs = {o.text_path};  // --route-trace must not replace it
  const model::ModelConfig user_cfg = o.engine.to_model_config();  // reads the trim env once
  const std::string text = io::read_text_input(o.text_path, "-f");  // fail before loading anything
  const moe::TrimConfig trims = user_cfg.trims;
  std::shared_ptr<const gguf::GgufModel> g =
      std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(o.engine.model_path));
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(g->metadata());
  const uint32_t ctx_train = model::describe_architecture(*g).hp.n_ctx_train;

  const int ctx = o.ctx > 0 ? o.ctx : static_cast<int>(std::min<uint32_t>(ctx_train > 0 ? ctx_train : 512, 512));
  if (ctx < 2) throw Error("--ctx: a window needs at least 2 tokens (got " + std::to_string(ctx) + ")");
  model::ModelConfig cfg = user_cfg;
  cfg.n_ctx = std::max(cfg.n_ctx, ctx);
  std::unique_ptr<model::Model> m = model::load_model(g, cfg);
  std::unique_ptr<model::Model> reference;
  if (trims_set(trims)) {
    model::ModelConfig ref_cfg = cfg;
    ref_cfg.trims = moe::TrimConfig{};
    reference = model::load_model(g, ref_cfg);
  }

  const std::vector<int32_t> ids = tok.encode(text, false, false);
  bench::EvalOptions eo;
  eo.ctx = ctx;
  eo.bos = tok.add_bos() ? tok.bos() : -1;
  eo.batch = cfg.ubatch;  // eval calls on ubatch boundaries: the same ubatches as one big call
  eo.max_tokens = o.max_tokens;
  const bench::EvalResult r = bench::evaluate_text(*m, reference.get(), ids, eo);

  nlohmann::json j;
  j["model_path"] = o.engine.model_path;
  j["text_path"] = o.text_path;
  j["ctx"] = ctx;
  j["ubatch"] = cfg.ubatch;
  j["windows"] = r.n_windows;
  j["tokens_scored"] = r.n_scored;
  j["trims"] = {{"top_k", trims.top_k},
                {"top_p", trims.top_p},
                {"expert_budget", trims.expert_budget},
                {"drop_cold", trims.drop_cold},
                {"drop_renorm", trims.drop_renorm}};
  j["model"] = side_json(r.model, r.n_scored, r.ppl());
  if (r.has_reference) {
    j["reference"] = side_json(r.reference, r.n_scored, r.reference_ppl());
    j["kl_mean"] = r.mean_kl();
    j["top1_agree_pct"] = r.top1_agree_pct();
  }
  if (o.json) {
    outf("%s\n", json_text(j, 2).c_str());  // stdout is this object and nothing else
  } else {
    print_table(r, j);
  }
  flush_stdout();
  if (cfg.route_trace) cfg.route_trace->close();
}

}  // namespace

void register_eval(CLI::App& app) {
  auto opts = std::make_shared<EvalCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "perplexity over a text file; with routing trims, also KL/top-1 against the untrimmed model");
  add_engine_flags(cmd, opts->engine);
  cmd->add_option("-f,--file", opts->text_path, "UTF-8 text file to evaluate (- for stdin; at most 64 MiB)")->required();
  cmd->add_option("--ctx", opts->ctx, "tokens per evaluation window, BOS included (0: min(model context, 512))")
      ->capture_default_str();
  cmd->add_option("--max-tokens", opts->max_tokens, "use only the first N text tokens (0: all)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the result as one JSON object (python3 -m json.tool reads it)");
  cmd->footer(
      "Examples:\n"
      "  sluice eval -m model.gguf -f wiki.test.raw --max-tokens 4096\n"
      "  sluice eval -m model.gguf -f wiki.test.raw --moe-top-k 4 --json | python3 -m json.tool");
  cmd->callback([opts] { run_eval(*opts); });
}

}  // namespace sluice::cli
