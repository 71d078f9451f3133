// `sluice eval`: perplexity of a model over a text file, and — when any routing
// trim is set — the same windows through an untrimmed second instance of the
// model, so the quality price of the trims (KL, top-1 agreement, perplexity)
// sits next to their I/O savings (MiB and experts read per token).
//
// Design: two model instances sharing one GgufModel, rather than one model
// with trims toggled, so that each run has its own expert store (and cache)
// and its I/O figures are not flattered by the other's reads. The cost is a
// second copy of the dense weights and KV cache.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/stdout_output.h"
#include "io/text_input.h"
#include "model/arch.h"
#include "bench/eval.h"
#include "bench/kld_base_file.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::cli {
namespace {

struct EvalCmdOptions {
  runtime::EngineOptions engine;
  std::string text_path;
  int ctx = 0;              // 0: -c, else min(model context, 512)
  int64_t max_tokens = 0;   // 0: all
  std::string ppl_mode;     // "" (sluice), "sluice" or "llama"
  int chunks = 0;           // --chunks (llama mode), 0: all
  std::string kld_base;     // --kl-divergence-base FILE
  bool kld = false;         // --kl-divergence: read kld_base instead of writing it
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

nlohmann::json kld_json(const bench::KldStats& s) {
  const double n = s.count > 0 ? static_cast<double>(s.count) : 1.0;
  return {{"rows", s.count},
          {"ppl", std::exp(s.sum_nll / n)},
          {"ppl_base", std::exp(s.sum_nll_base / n)},
          {"kld_mean", s.sum_kld / n},
          {"same_top_pct", 100.0 * static_cast<double>(s.n_same_top) / n},
          {"p_diff_mean_pct", 100.0 * s.sum_p_diff / n},
          {"p_diff_rms_pct", 100.0 * std::sqrt(s.sum_p_diff2 / n)},
          {"p_diff_max_pct", 100.0 * s.max_p_diff}};
}

void print_table(const bench::EvalResult& r, const nlohmann::json& j) {
  const bool ref = r.has_reference;
  outf("eval: %d %s, %lld tokens scored (--ppl-mode %s, %d tokens each)\n", r.n_windows,
       j["ppl_mode"] == "llama" ? "chunks" : "windows", static_cast<long long>(r.n_scored),
       j["ppl_mode"].get<std::string>().c_str(), j["ctx"].get<int>());
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

// The window: --ctx, else -c (the flag a llama-perplexity user types), else
// min(model context, 512); a window larger than an explicit -c is an error.
int eval_window(const EvalCmdOptions& o, uint32_t ctx_train) {
  const int c = o.engine.n_ctx;
  if (o.ctx > 0 && c > 0 && o.ctx > c)
    throw Error("--ctx " + std::to_string(o.ctx) + " is larger than the context -c " + std::to_string(c) +
                ": a window must fit the context (drop --ctx to use -c as the window)");
  const int ctx = o.ctx > 0 ? o.ctx : c > 0 ? c : static_cast<int>(std::min<uint32_t>(ctx_train > 0 ? ctx_train : 512, 512));
  if (ctx < 2) throw Error("--ctx: a window needs at least 2 tokens (got " + std::to_string(ctx) + ")");
  return ctx;
}

bench::PplMode parse_mode(const EvalCmdOptions& o) {
  if (o.ppl_mode.empty()) return o.kld_base.empty() ? bench::PplMode::Sluice : bench::PplMode::Llama;
  const bench::PplMode m = o.ppl_mode == "llama" ? bench::PplMode::Llama : bench::PplMode::Sluice;
  if (m == bench::PplMode::Sluice && !o.kld_base.empty())
    throw Error("--kl-divergence-base: the file holds llama-perplexity's chunks; it needs --ppl-mode llama (the default with it)");
  return m;
}

void run_eval(EvalCmdOptions& o) {
  if (o.kld && o.kld_base.empty()) throw Error("--kl-divergence: give the base file with --kl-divergence-base FILE");
  if (!o.kld && o.text_path.empty()) throw Error("-f: the text to evaluate is required (except with --kl-divergence)");
  if (o.chunks < 0) throw Error("--chunks: must be >= 0 (got " + std::to_string(o.chunks) + ")");
  const bench::PplMode mode = parse_mode(o);
  if (o.chunks > 0 && mode != bench::PplMode::Llama) throw Error("--chunks: only with --ppl-mode llama");
  o.engine.extra_inputs = {o.text_path, o.kld_base};  // --route-trace must not replace them
  const model::ModelConfig user_cfg = o.engine.to_model_config();  // reads the trim env once
  // Fail on the inputs before loading anything.
  std::optional<bench::KldBaseReader> base_in;
  std::string text;
  if (o.kld)
    base_in.emplace(o.kld_base);
  else
    text = io::read_text_input(o.text_path, "-f");
  const moe::TrimConfig trims = user_cfg.trims;
  std::shared_ptr<const gguf::GgufModel> g =
      std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(o.engine.model_path));
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(g->metadata());
  const model::ArchDesc desc = model::describe_architecture(*g);

  int ctx = 0;
  std::vector<int32_t> ids;
  if (base_in) {
    const bench::KldBaseHeader& h = base_in->header();
    if (static_cast<uint32_t>(h.n_vocab) != desc.hp.n_vocab)
      throw Error(o.kld_base + ": written for a vocabulary of " + std::to_string(h.n_vocab) + " tokens; " +
                  o.engine.model_path + " has " + std::to_string(desc.hp.n_vocab));
    const int asked = o.ctx > 0 ? o.ctx : o.engine.n_ctx;
    if (asked > 0 && asked != h.n_ctx)
      throw Error(o.kld_base + ": its chunks are " + std::to_string(h.n_ctx) + " tokens, not " +
                  std::to_string(asked) + " (-c/--ctx): drop the flag or give " + std::to_string(h.n_ctx));
    ctx = h.n_ctx;
    ids = base_in->tokens();
  } else {
    ctx = eval_window(o, desc.hp.n_ctx_train);
    // llama mode tokenizes as llama-perplexity does: BOS first where the vocabulary adds one.
    ids = tok.encode(text, mode == bench::PplMode::Llama, false);
  }
  model::ModelConfig cfg = user_cfg;
  cfg.n_ctx = std::max(cfg.n_ctx, ctx);
  std::unique_ptr<model::Model> m = model::load_model(g, cfg);
  std::unique_ptr<model::Model> reference;
  if (trims_set(trims)) {
    model::ModelConfig ref_cfg = cfg;
    ref_cfg.trims = moe::TrimConfig{};
    reference = model::load_model(g, ref_cfg);
  }

  bench::EvalOptions eo;
  eo.ctx = ctx;
  eo.bos = tok.add_bos() ? tok.bos() : -1;
  eo.batch = cfg.ubatch;  // eval calls on ubatch boundaries: the same ubatches as one big call
  eo.max_tokens = o.max_tokens;
  eo.mode = mode;
  eo.max_chunks = o.chunks;
  const int32_t n_vocab = static_cast<int32_t>(desc.hp.n_vocab);

  // --kl-divergence-base without --kl-divergence: write the base file.
  std::optional<bench::KldBaseWriter> base_out;
  std::optional<bench::KldStats> kld;
  std::vector<uint16_t> base_rows;
  int base_chunk = -1;
  if (!o.kld_base.empty() && !o.kld) {
    const size_t usable = o.max_tokens > 0 ? std::min<size_t>(ids.size(), static_cast<size_t>(o.max_tokens)) : ids.size();
    size_t n_chunk = usable / static_cast<size_t>(ctx);
    if (o.chunks > 0) n_chunk = std::min(n_chunk, static_cast<size_t>(o.chunks));
    if (usable >= 2 * static_cast<size_t>(ctx)) {
      std::vector<std::string> inputs = g->paths();
      inputs.push_back(o.text_path);
      base_out.emplace(o.kld_base, inputs, bench::KldBaseHeader{ctx, n_vocab, static_cast<int32_t>(n_chunk)},
                       std::span<const int32_t>(ids.data(), n_chunk * static_cast<size_t>(ctx)));
      eo.on_scored_row = [&](int, int, const float* logits, int32_t target) { base_out->write_row(logits, target); };
    }  // else evaluate_text reports the short text
  } else if (base_in) {
    kld.emplace();
    eo.on_scored_row = [&](int window, int row, const float* logits, int32_t target) {
      if (window != base_chunk) {
        base_in->read_chunk(window, base_rows);
        base_chunk = window;
      }
      kld->add(logits, n_vocab, &base_rows[static_cast<size_t>(row) * bench::kld_row_u16(n_vocab)], target);
    };
  }
  const bench::EvalResult r = bench::evaluate_text(*m, reference.get(), ids, eo);
  if (base_out) base_out->commit();

  nlohmann::json j;
  j["model_path"] = o.engine.model_path;
  j["text_path"] = o.kld ? o.kld_base : o.text_path;
  j["ppl_mode"] = bench::ppl_mode_name(mode);
  j["ctx"] = ctx;
  j["ubatch"] = cfg.ubatch;
  j["windows"] = r.n_windows;
  j["tokens_scored"] = r.n_scored;
  j["ppl_uncertainty"] = r.ppl_uncertainty();
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
  if (kld) j["kl_divergence_base"] = kld_json(*kld);
  if (o.json) {
    outf("%s\n", json_text(j, 2).c_str());  // stdout is this object and nothing else
  } else {
    print_table(r, j);
    if (mode == bench::PplMode::Llama)
      outf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl(), r.ppl_uncertainty());  // llama-perplexity's line
    if (base_out) outf("eval: wrote the base log-probabilities to %s\n", o.kld_base.c_str());
    if (kld) outf("\n%s", bench::kld_report(*kld).c_str());
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
  cmd->add_option("-f,--file", opts->text_path,
                  "UTF-8 text file to evaluate (- for stdin; at most 64 MiB); not with --kl-divergence");
  cmd->add_option("--ctx", opts->ctx,
                  "tokens per evaluation window, BOS included (0: -c when given, else min(model context, 512))")
      ->capture_default_str();
  cmd->add_option("--ppl-mode", opts->ppl_mode,
                  "sluice: every token scored in windows of --ctx; llama: llama-perplexity's chunks "
                  "(second half of each scored, BOS first), whose PPL compares with llama.cpp's")
      ->check(CLI::IsMember({"sluice", "llama"}));
  cmd->add_option("--chunks", opts->chunks, "--ppl-mode llama: evaluate only the first N chunks (0: all)")
      ->capture_default_str();
  cmd->add_option("--kl-divergence-base", opts->kld_base,
                  "llama-perplexity's base log-probabilities file: written by this run (llama mode), or read "
                  "with --kl-divergence; either engine's file works in the other");
  cmd->add_flag("--kl-divergence", opts->kld,
                "score the model against --kl-divergence-base (its tokens; no -f): KL divergence, "
                "same top token, probability shift, as llama-perplexity reports them");
  cmd->add_option("--max-tokens", opts->max_tokens, "use only the first N text tokens (0: all)")
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the result as one JSON object (python3 -m json.tool reads it)");
  cmd->footer(
      "Examples:\n"
      "  sluice eval -m model.gguf -f wiki.test.raw --max-tokens 4096\n"
      "  sluice eval -m model.gguf -f wiki.test.raw --moe-top-k 4 --json | python3 -m json.tool\n"
      "  sluice eval -m f16.gguf -f wiki.test.raw -c 512 --kl-divergence-base base.kld\n"
      "  sluice eval -m q4.gguf --kl-divergence-base base.kld --kl-divergence");
  cmd->callback([opts] { run_eval(*opts); });
}

}  // namespace sluice::cli
