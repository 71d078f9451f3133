// Text evaluation: perplexity of a model over a token stream, and — given a
// reference model — how far the model's next-token distributions are from the
// reference's (mean KL, top-1 agreement). `sluice eval` uses it to put the
// quality price of the routing trims next to their I/O savings: the model
// under test has the trims, the reference is the same file without them.
//
// Windows: the text tokens are cut into consecutive, non-overlapping windows;
// each is evaluated from an empty KV cache, prefixed with `bos` when one is
// given. Within a window, row i of the logits predicts token i+1; the first
// token of a window is never scored. Rows are compared only at scored positions.
//
// Both models are used from the calling thread only; each is reset per window.
// Errors (a bad token id, I/O failure) propagate as sluice::Error.
#pragma once

#include <cstdint>
#include <span>

#include "model/model.h"

namespace sluice::bench {

struct EvalOptions {
  int ctx = 512;        // positions per window, BOS included; >= 2
  int32_t bos = -1;     // prepended to every window when >= 0
  int batch = 512;      // positions per Model::eval call (bounds the logits buffer); >= 1
  int64_t max_tokens = 0;  // text tokens to use from the start of the stream; 0 = all
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
  EvalSide model;            // the model under test
  bool has_reference = false;
  EvalSide reference;        // only when has_reference
  double kl_sum = 0.0;       // sum over scored positions of KL(reference || model), nats
  int64_t top1_agree = 0;    // scored positions where both argmaxes agree (lower id on ties)

  double ppl() const;            // exp(mean NLL) of the model
  double reference_ppl() const;  // same for the reference
  double mean_nll() const;
  double mean_kl() const;        // 0 without a reference
  double top1_agree_pct() const; // 100 * agreement; 100 without a reference
};

// Evaluates `text` (token ids, no BOS) with `model`, and with `reference` too
// when it is non-null (same vocabulary required). Throws Error for bad options
// or a text too short to score anything.
EvalResult evaluate_text(model::Model& model, model::Model* reference, std::span<const int32_t> text,
                         const EvalOptions& opts);

}  // namespace sluice::bench
