#include "bench/eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "util/clock.h"
#include "util/error.h"

namespace sluice::bench {
namespace {

// log-sum-exp of one logits row, in double.
double log_partition(const float* row, int n) {
  float mx = row[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, row[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  return mx + std::log(sum);
}

int argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;  // strict: the lower id wins a tie
  return best;
}

// KL(p || q) for p = softmax(ref), q = softmax(test); lz_* are their log-partitions.
double kl_divergence(const float* ref, double lz_ref, const float* test, double lz_test, int n) {
  double kl = 0.0;
  for (int i = 0; i < n; ++i) {
    const double lp = ref[i] - lz_ref;
    const double lq = test[i] - lz_test;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(kl, 0.0);  // rounding can leave a tiny negative for equal rows
}

moe::TrimStats trim_delta(const moe::TrimStats& after, const moe::TrimStats& before) {
  moe::TrimStats d;
  d.positions = after.positions - before.positions;
  d.routed = after.routed - before.routed;
  d.kept = after.kept - before.kept;
  d.dropped_by_top_p = after.dropped_by_top_p - before.dropped_by_top_p;
  d.dropped_by_budget = after.dropped_by_budget - before.dropped_by_budget;
  d.dropped_by_cold = after.dropped_by_cold - before.dropped_by_cold;
  d.positions_emptied = after.positions_emptied - before.positions_emptied;
  return d;
}

// Accumulates one model's side: its logits for the current eval call and counters.
struct SideRun {
  model::Model& m;
  model::ModelStats start;
  std::vector<float> logits;
  EvalSide side;

  explicit SideRun(model::Model& model) : m(model), start(model.stats()) {}

  void eval(std::span<const int32_t> tokens, int pos0, int n_vocab) {
    logits.resize(tokens.size() * static_cast<size_t>(n_vocab));
    const auto t0 = std::chrono::steady_clock::now();
    m.eval(tokens, pos0, logits.data());
    side.seconds += seconds_since(t0);
  }

  void finish() {
    const model::ModelStats end = m.stats();
    side.tokens_evaluated = static_cast<int64_t>(end.tokens_evaluated - start.tokens_evaluated);
    side.bytes_read = end.io.bytes_read - start.io.bytes_read;
    side.experts_read = end.io.experts_read - start.io.experts_read;
    side.trims = trim_delta(end.trims, start.trims);
  }
};

// A window's text tokens: text[offset, offset + length).
struct Window {
  size_t offset = 0;
  size_t length = 0;
};

// Consecutive windows of ctx positions, a BOS prefix taking one of them; a
// trailing piece shorter than two positions has nothing to score and is dropped.
std::vector<Window> sluice_windows(std::span<const int32_t> text, const EvalOptions& opts) {
  const size_t with_bos = opts.bos >= 0 ? 1 : 0;
  const size_t per_window = static_cast<size_t>(opts.ctx) - with_bos;
  std::vector<Window> w;
  for (size_t off = 0; off < text.size(); off += per_window) {
    const size_t n = std::min(per_window, text.size() - off);
    if (n + with_bos < 2) break;
    w.push_back({off, n});
  }
  return w;
}

// llama-perplexity's whole chunks (see eval.h).
std::vector<Window> llama_windows(std::span<const int32_t> text, const EvalOptions& opts) {
  if (opts.ctx < 4) throw Error("-c: --ppl-mode llama needs chunks of at least 4 tokens (got " + std::to_string(opts.ctx) + ")");
  const size_t ctx = static_cast<size_t>(opts.ctx);
  if (text.size() < 2 * ctx)
    throw Error("eval: --ppl-mode llama needs at least " + std::to_string(2 * ctx) + " tokens for chunks of " +
                std::to_string(ctx) + " (as llama-perplexity does); the text has " + std::to_string(text.size()));
  size_t n_chunk = text.size() / ctx;
  if (opts.max_chunks > 0) n_chunk = std::min(n_chunk, static_cast<size_t>(opts.max_chunks));
  std::vector<Window> w;
  for (size_t i = 0; i < n_chunk; ++i) w.push_back({i * ctx, ctx});
  return w;
}

double per_token(double v, int64_t tokens) { return tokens > 0 ? v / static_cast<double>(tokens) : 0.0; }

}  // namespace

double EvalSide::mib_per_token() const { return per_token(static_cast<double>(bytes_read) / 1048576.0, tokens_evaluated); }
double EvalSide::experts_read_per_token() const { return per_token(static_cast<double>(experts_read), tokens_evaluated); }

double EvalResult::mean_nll() const { return n_scored > 0 ? model.nll_sum / static_cast<double>(n_scored) : 0.0; }
double EvalResult::ppl() const { return std::exp(mean_nll()); }
double EvalResult::ppl_uncertainty() const {
  if (n_scored < 2) return 0.0;
  const double n = static_cast<double>(n_scored);
  const double var = nll2_sum / n - mean_nll() * mean_nll();
  return var > 0 ? ppl() * std::sqrt(var / (n - 1)) : 0.0;
}

const char* ppl_mode_name(PplMode m) { return m == PplMode::Llama ? "llama" : "sluice"; }
double EvalResult::reference_ppl() const {
  return n_scored > 0 ? std::exp(reference.nll_sum / static_cast<double>(n_scored)) : 0.0;
}
double EvalResult::mean_kl() const { return n_scored > 0 ? kl_sum / static_cast<double>(n_scored) : 0.0; }
double EvalResult::top1_agree_pct() const {
  if (!has_reference || n_scored == 0) return 100.0;
  return 100.0 * static_cast<double>(top1_agree) / static_cast<double>(n_scored);
}

EvalResult evaluate_text(model::Model& model, model::Model* reference, std::span<const int32_t> text,
                         const EvalOptions& opts) {
  if (opts.ctx < 2) throw Error("--ctx: a window needs at least 2 tokens (got " + std::to_string(opts.ctx) + ")");
  if (opts.batch < 1) throw Error("eval: batch must be >= 1 (got " + std::to_string(opts.batch) + ")");
  if (opts.max_tokens < 0)
    throw Error("--max-tokens: must be >= 0 (got " + std::to_string(opts.max_tokens) + ")");
  if (opts.ctx > model.n_ctx())
    throw Error("--ctx " + std::to_string(opts.ctx) + " exceeds the model's context size " +
                std::to_string(model.n_ctx()));
  const int n_vocab = static_cast<int>(model.hparams().n_vocab);
  if (reference && static_cast<int>(reference->hparams().n_vocab) != n_vocab)
    throw Error("eval: the reference model has a different vocabulary size");
  if (reference && opts.ctx > reference->n_ctx())
    throw Error("--ctx " + std::to_string(opts.ctx) + " exceeds the reference model's context size");

  if (opts.max_tokens > 0 && static_cast<int64_t>(text.size()) > opts.max_tokens)
    text = text.first(static_cast<size_t>(opts.max_tokens));
  const std::vector<Window> windows = opts.mode == PplMode::Llama ? llama_windows(text, opts) : sluice_windows(text, opts);
  const int first_scored = opts.mode == PplMode::Llama ? opts.ctx / 2 : 0;

  EvalResult r;
  r.has_reference = reference != nullptr;
  SideRun test(model);
  std::optional<SideRun> ref;
  if (reference) ref.emplace(*reference);

  std::vector<int32_t> window;
  for (size_t w = 0; w < windows.size(); ++w) {
    window.clear();
    const bool prefix_bos = opts.mode == PplMode::Sluice && opts.bos >= 0;
    if (prefix_bos) window.push_back(opts.bos);
    window.insert(window.end(), text.begin() + static_cast<std::ptrdiff_t>(windows[w].offset),
                  text.begin() + static_cast<std::ptrdiff_t>(windows[w].offset + windows[w].length));
    if (opts.mode == PplMode::Llama && opts.bos >= 0) window[0] = opts.bos;
    ++r.n_windows;
    model.reset();
    if (reference) reference->reset();
    const int W = static_cast<int>(window.size());
    for (int p0 = 0; p0 < W; p0 += opts.batch) {
      const int n = std::min(opts.batch, W - p0);
      const std::span<const int32_t> piece(window.data() + p0, static_cast<size_t>(n));
      test.eval(piece, p0, n_vocab);
      if (ref) ref->eval(piece, p0, n_vocab);
      for (int i = 0; i < n; ++i) {
        const int pos = p0 + i;
        if (pos < first_scored) continue;
        if (pos + 1 >= W) break;  // the last row predicts past the window
        const int32_t target = window[static_cast<size_t>(pos) + 1];
        const float* lt = &test.logits[static_cast<size_t>(i) * n_vocab];
        const double lz_t = log_partition(lt, n_vocab);
        const double nll = lz_t - lt[target];
        test.side.nll_sum += nll;
        r.nll2_sum += nll * nll;
        if (opts.on_scored_row) opts.on_scored_row(static_cast<int>(w), pos - first_scored, lt, target);
        if (ref) {
          const float* lr = &ref->logits[static_cast<size_t>(i) * n_vocab];
          const double lz_r = log_partition(lr, n_vocab);
          ref->side.nll_sum += lz_r - lr[target];
          r.kl_sum += kl_divergence(lr, lz_r, lt, lz_t, n_vocab);
          if (argmax(lr, n_vocab) == argmax(lt, n_vocab)) ++r.top1_agree;
        }
        ++r.n_scored;
      }
    }
  }
  if (r.n_scored == 0) throw Error("eval: the text is too short to score any token");
  test.finish();
  r.model = test.side;
  if (ref) {
    ref->finish();
    r.reference = ref->side;
  }
  return r;
}

}  // namespace sluice::bench
