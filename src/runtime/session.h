// A loaded model plus its conversation state, and the generation loop.
//
// Session owns the GgufModel and the Model (with its state). It keeps the
// history of tokens evaluated so far, so generate() can continue where the
// last call stopped, and so a rollback the model cannot do exactly (a
// recurrent layer restores a checkpoint before the wanted position) is
// completed by re-evaluating the missing tokens (counted: recomputed_tokens).
// Not thread-safe: one caller at a time.
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
#include "util/error.h"
#include "telemetry/telemetry.h"

namespace sluice::runtime {

// --mtp: speculative decoding with the model's NextN head (model::Model::
// has_mtp; load with ModelConfig::mtp). Each step drafts up to `depth` tokens
// with the head, the trunk verifies the last token plus the drafts in one
// forward (each routed expert read once per layer for the whole batch, so
// --expert-budget caps that union), and the longest accepted prefix plus one
// token of the trunk's own are emitted. Greedy output is byte-identical to
// decoding without MTP; with sampling, speculative sampling's acceptance rule
// (Sampler::accept_or_resample) keeps the output distribution.
// --ngram N: the same verify loop with drafts from prompt lookup
// (ngram_draft.h) instead of the head; no NextN head needed.
struct MtpOptions {
  int depth = 0;            // drafts per step (0: off)
  int ngram = 0;            // > 0: draft by looking up the last `ngram` tokens (--ngram), not with the head
  bool automatic = false;   // --mtp auto: measure and switch drafting off (and back on) when it loses
  float p_min = 0.0f;       // stop drafting when the draft's top probability is below this
  int window = 16;          // auto: emitted tokens per measurement window
  std::function<void(const std::string&)> log;  // auto: one line per decision
};

struct GenerationStats {
  int prefill_tokens = 0;
  double prefill_seconds = 0;
  int decode_tokens = 0;     // tokens evaluated one at a time after the prompt
  double decode_seconds = 0;
  int generated = 0;         // tokens produced
  double ttft_seconds = 0;   // from generate() entry to the first token handed to on_token
  bool context_full = false;  // stopped because the context had no room for the next token
};

class Session {
 public:
  // Opens PATH and builds the model. Throws Error on any problem.
  static Session open(const std::string& path, const model::ModelConfig& cfg);
  Session(std::shared_ptr<const gguf::GgufModel> gguf, std::unique_ptr<model::Model> model);

  model::Model& model() { return *model_; }
  const gguf::GgufModel& gguf() const { return *gguf_; }
  std::shared_ptr<const gguf::GgufModel> gguf_ptr() const { return gguf_; }
  // Tokens evaluated (the last sampled token is evaluated lazily). The model
  // state may hold fewer after a rollback that fell back to a checkpoint; the
  // next evaluation re-evaluates the rest first.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int n_vocab() const { return static_cast<int>(model_->hparams().n_vocab); }

  void reset();
  // How many leading tokens of `tokens` the session has already evaluated
  // (its history, the pending token included).
  size_t common_prefix(std::span<const int32_t> tokens) const;
  // Keeps only the first n tokens of the history and truncates the model
  // state there (Model::truncate; where it falls back further, the next
  // evaluation re-evaluates the difference). With --mtp a rewind into the
  // head's rows starts the session over (the head needs hidden states it no
  // longer has).
  void rewind(size_t n);

  // --mtp for later generate() calls (Error when depth > 0 and the model has
  // no MTP head loaded). Feeding and evaluation then also keep the trunk's
  // hidden states the head needs.
  void set_mtp(const MtpOptions& o);
  const telemetry::MtpCounters& mtp_counters() const { return mtp_counters_; }
  // Evaluates `tokens` after the cached ones; returns the last row of logits
  // (valid until the next call).
  std::span<const float> feed(std::span<const int32_t> tokens);

  // Appends `prompt`, then generates up to n_predict tokens (< 0: no limit)
  // with `sampler`, calling on_token(id) for each (return false to stop
  // early). Stops at a token in `stop_ids` (which is still reported and
  // counted), and cleanly when the context has no room for the next token
  // (GenerationStats::context_full; the last token stays pending). A prompt
  // that does not fit is an Error. A constrained sampler that allows no
  // token (sample() -1) ends generation there, with nothing reported. With
  // --mtp, a constrained or observed sampler generates without drafts.
  GenerationStats generate(std::span<const int32_t> prompt, int n_predict, Sampler& sampler,
                           const std::function<bool(int32_t)>& on_token, std::span<const int32_t> stop_ids = {});

  // Evaluates `tokens` after the cached ones (one prefill record, then a
  // checkpoint of the recurrent state) and writes
  // every row of logits, [tokens.size()][n_vocab], to logits_out. Error if a
  // sampled token is still pending (its row would be missing).
  void eval_all(std::span<const int32_t> tokens, float* logits_out);

  // `sluice chat --save/--load`: the evaluated history and its model state
  // as a slot file (runtime/slot_file.h). save_state writes it crash-safe
  // (a sampled token not yet evaluated is not part of it); load_state
  // replaces the history with the file's (SlotFileError for a bad or
  // foreign file: the session is then empty; Error with --mtp). Both return
  // the tokens the file holds.
  size_t save_state(const std::string& path);
  size_t load_state(const std::string& path);

  // Telemetry: every eval above (feed, generate, eval_all) adds one record;
  // records survive reset(). Set the recorder's callback for live output.
  telemetry::TokenRecorder& telemetry() { return recorder_; }
  const telemetry::TokenRecorder& telemetry() const { return recorder_; }
  // The end-of-run summary over all records so far (samples dense residency
  // and peak RSS now).
  telemetry::RunSummary summary(const telemetry::SummaryOptions& opts = {}) const;
  // Tokens re-evaluated because a rollback fell back to an earlier checkpoint
  // (0 for models whose layers all keep KV rows: their rollback is exact).
  uint64_t recomputed_tokens() const { return recomputed_tokens_; }

 private:
  // Brings the model state to exactly tokens_.size() positions before an
  // evaluation: truncates what is past it, and re-evaluates from the history
  // what a rollback fell back over (counted in recomputed_tokens_).
  void sync_model();
  std::span<const float> feed_as(std::span<const int32_t> tokens, telemetry::EvalKind kind);
  // generate()'s prompt part: pending + prompt as one prefill record (Error
  // when both are empty); fills st's prefill fields.
  void prefill_for_generate(std::span<const int32_t> prompt, GenerationStats& st);
  // Drafting with the NextN head (--mtp), whose hidden-state bookkeeping
  // every evaluation keeps; --ngram drafts need none of it.
  bool head_drafts() const { return mtp_.depth > 0 && mtp_.ngram == 0; }
  // generate() with --mtp or --ngram (session_mtp.cpp).
  GenerationStats generate_mtp(std::span<const int32_t> prompt, int n_predict, Sampler& sampler,
                               const std::function<bool(int32_t)>& on_token, std::span<const int32_t> stop_ids);
  // The NextN head over the rows not yet fed to it plus (next, h of the last
  // position) at position tokens_.size(); returns the last row's draft logits
  // (in mtp_logits_) and its g (in mtp_g_). Records one Draft eval.
  void mtp_catch_up_and_draft(int32_t next);
  // One chained draft step: (token, g of the previous step) at `pos`.
  void mtp_draft_step(int32_t token, int pos);

  std::shared_ptr<const gguf::GgufModel> gguf_;
  std::unique_ptr<model::Model> model_;
  std::vector<int32_t> tokens_;   // the history: evaluated (the model state may lag, see sync_model)
  std::vector<int32_t> pending_;  // sampled last, not yet evaluated
  std::vector<float> logits_;
  telemetry::TokenRecorder recorder_;
  double ttft_ms_ = 0;  // of the session's first generate()
  uint64_t recomputed_tokens_ = 0;

  // --mtp state. Invariant: the head's KV rows hold the true rows
  // (t_q, h_{q-1}) for q < mtp_n_ (<= tokens_.size()), and mtp_hidden_ holds
  // h_{q-1} for q in [mtp_n_, tokens_.size()] (h_{-1} = zeros): the hidden
  // inputs of the rows still to feed, the last one for the next token.
  MtpOptions mtp_;
  telemetry::MtpCounters mtp_counters_;
  int mtp_n_ = 0;
  std::vector<float> mtp_hidden_;
  std::vector<float> mtp_logits_, mtp_g_;  // the last draft step's row
  std::vector<float> verify_logits_, verify_hidden_;
};

}  // namespace sluice::runtime
