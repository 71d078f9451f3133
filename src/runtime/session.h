// A loaded model plus its conversation state, and the generation loop.
//
// Session owns the GgufModel and the Model (with its KV cache). It tracks the
// tokens evaluated so far, so generate() can continue where the last call
// stopped. Not thread-safe: one caller at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/telemetry.h"

namespace sluice::runtime {

struct GenerationStats {
  int prefill_tokens = 0;
  double prefill_seconds = 0;
  int decode_tokens = 0;     // tokens evaluated one at a time after the prompt
  double decode_seconds = 0;
  int generated = 0;         // tokens produced
  double ttft_seconds = 0;   // from generate() entry to the first token handed to on_token
};

class Session {
 public:
  // Opens PATH and builds the model. Throws Error on any problem.
  static Session open(const std::string& path, const model::ModelConfig& cfg);
  Session(std::shared_ptr<const gguf::GgufModel> gguf, std::unique_ptr<model::Model> model);

  model::Model& model() { return *model_; }
  const gguf::GgufModel& gguf() const { return *gguf_; }
  std::shared_ptr<const gguf::GgufModel> gguf_ptr() const { return gguf_; }
  // Tokens in the KV cache (the last sampled token is evaluated lazily).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int n_vocab() const { return static_cast<int>(model_->hparams().n_vocab); }

  void reset();
  // Evaluates `tokens` after the cached ones; returns the last row of logits
  // (valid until the next call).
  std::span<const float> feed(std::span<const int32_t> tokens);

  // Appends `prompt`, then generates up to n_predict tokens with `sampler`,
  // calling on_token(id) for each (return false to stop early). Stops at
  // a token in `stop_ids` (which is still reported and counted).
  GenerationStats generate(std::span<const int32_t> prompt, int n_predict, Sampler& sampler,
                           const std::function<bool(int32_t)>& on_token, std::span<const int32_t> stop_ids = {});

  // Evaluates `tokens` after the cached ones (one prefill record) and writes
  // every row of logits, [tokens.size()][n_vocab], to logits_out. Error if a
  // sampled token is still pending (its row would be missing).
  void eval_all(std::span<const int32_t> tokens, float* logits_out);

  // Telemetry: every eval above (feed, generate, eval_all) adds one record;
  // records survive reset(). Set the recorder's callback for live output.
  TokenRecorder& telemetry() { return recorder_; }
  const TokenRecorder& telemetry() const { return recorder_; }
  // The end-of-run summary over all records so far (samples dense residency
  // and peak RSS now).
  RunSummary summary(const SummaryOptions& opts = {}) const;

 private:
  std::span<const float> feed_as(std::span<const int32_t> tokens, EvalKind kind);

  std::shared_ptr<const gguf::GgufModel> gguf_;
  std::unique_ptr<model::Model> model_;
  std::vector<int32_t> tokens_;   // evaluated (in the KV cache)
  std::vector<int32_t> pending_;  // sampled last, not yet evaluated
  std::vector<float> logits_;
  TokenRecorder recorder_;
  double ttft_ms_ = 0;  // of the session's first generate()
};

}  // namespace sluice::runtime
