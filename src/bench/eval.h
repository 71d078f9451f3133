// Text evaluation: perplexity of a model over a token stream, and — given a
// reference model — how far the model's next-token distributions are from the
// reference's (mean KL, top-1 agreement). `sluice eval` uses it to put the
// quality price of the routing trims next to their I/O savings: the model
// under test has the trims, the reference is the same file without them.
//
// Windows (PplMode::Sluice, the default): the text tokens are cut into
// consecutive, non-overlapping windows; each is evaluated from an empty model
// state, prefixed with `bos` when one is given. Within a window, row i of the
// logits predicts token i+1; every row but the last is scored.
// PplMode::Llama is llama-perplexity's scheme (llama.cpp b10573), so the two
// engines' figures compare: the stream (BOS first when the vocabulary adds one:
// the caller passes it so) is cut into floor(n / ctx) whole chunks of `ctx`
// tokens, each chunk's first token replaced by `bos`; only the second half is
// scored (rows ctx/2 .. ctx-2); fewer than 2 * ctx tokens is an error.
// Rows are compared only at scored positions.
//
// Both models are used from the calling thread only; each is reset per window.
// Errors (a bad token id, I/O failure) propagate as sluice::Error.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/model.h"

namespace sluice::bench {

enum class PplMode { Sluice, Llama };
const char* ppl_mode_name(PplMode m);

// Sees every scored row of the model under test, in order: the window, the
// row's index among that window's scored rows, the logits, the token it predicts.
using ScoredRowHook = std::function<void(int window, int row, const float* logits, int32_t target)>;

struct EvalOptions {
  int ctx = 512;        // positions per window, BOS included; >= 2 (Llama: >= 4)
  int32_t bos = -1;     // Sluice: prepended to every window; Llama: replaces each chunk's first token
  int batch = 512;      // positions per Model::eval call (bounds the logits buffer); >= 1
  int64_t max_tokens = 0;  // text tokens to use from the start of the stream; 0 = all
  PplMode mode = PplMode::Sluice;
  int max_chunks = 0;   // Llama: chunks to evaluate (0 = all)
  ScoredRowHook on_scored_row;  // optional
};

// One model's side of an evaluation; counters are deltas over this evaluation.
struct EvalSide {
  double nll_sum = 0.0;         // summed next-token negative log-likelihood, nats
  int64_t tokens_evaluated = 0; // positions run through the model (BOS included)
  double seconds = 0.0;         // wall time inside Model::eval
  uint64_t bytes_read = 0;      // expert bytes read
  uint64_t experts_read = 0;    // expert loads (one per distinct expert per layer per ubatch, cache off)
  moe::TrimStats trims;         // routing entries, summed over positions x MoE layers

  double mib_per_token() const;
  double experts_read_per_token() const;
};

struct EvalResult {
  int n_windows = 0;
  int64_t n_scored = 0;      // predicted tokens
  double nll2_sum = 0.0;     // sum of squared NLLs of the model (for the uncertainty)
  EvalSide model;            // the model under test
  bool has_reference = false;
  EvalSide reference;        // only when has_reference
  double kl_sum = 0.0;       // sum over scored positions of KL(reference || model), nats
  int64_t top1_agree = 0;    // scored positions where both argmaxes agree (lower id on ties)

  double ppl() const;            // exp(mean NLL) of the model
  double reference_ppl() const;  // same for the reference
  double mean_nll() const;
  double ppl_uncertainty() const;  // llama-perplexity's "+/-": ppl * stddev(NLL) / sqrt(n - 1)
  double mean_kl() const;        // 0 without a reference
  double top1_agree_pct() const; // 100 * agreement; 100 without a reference
};

// Evaluates `text` (token ids, no BOS) with `model`, and with `reference` too
// when it is non-null (same vocabulary required). Throws Error for bad options
// or a text too short to score anything.
EvalResult evaluate_text(model::Model& model, model::Model* reference, std::span<const int32_t> text,
                         const EvalOptions& opts);

}  // namespace sluice::bench
