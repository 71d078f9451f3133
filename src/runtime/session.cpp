#include "runtime/session.h"

#include <algorithm>
#include <chrono>

#include "util/clock.h"
#include "util/error.h"
#include "util/proc_memory.h"

namespace sluice::runtime {
Session Session::open(const std::string& path, const model::ModelConfig& cfg) {
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
  auto m = model::load_model(g, cfg);
  return Session(std::move(g), std::move(m));
}

Session::Session(std::shared_ptr<const gguf::GgufModel> gguf, std::unique_ptr<model::Model> model)
    : gguf_(std::move(gguf)), model_(std::move(model)) {
  logits_.resize(static_cast<size_t>(model_->hparams().n_vocab));
}

void Session::reset() {
  model_->reset();
  tokens_.clear();
  pending_.clear();
  mtp_n_ = 0;
  if (head_drafts()) mtp_hidden_.assign(static_cast<size_t>(model_->mtp_hidden_width()), 0.0f);
}

size_t Session::common_prefix(std::span<const int32_t> tokens) const {
  size_t n = 0;
  const size_t have = tokens_.size() + pending_.size();
  while (n < tokens.size() && n < have) {
    const int32_t t = n < tokens_.size() ? tokens_[n] : pending_[n - tokens_.size()];
    if (t != tokens[n]) break;
    ++n;
  }
  return n;
}

void Session::rewind(size_t n) {
  if (n >= tokens_.size() + pending_.size()) return;
  if (n <= tokens_.size()) {
    pending_.clear();
    tokens_.resize(n);
  } else {
    pending_.resize(n - tokens_.size());
  }
  // Explicit rollback: the model keeps [0, r) with r <= n; sync_model()
  // re-evaluates [r, n) from the history before the next evaluation.
  if (model_->n_past() > static_cast<int>(tokens_.size())) model_->truncate(static_cast<int>(tokens_.size()));
  if (!head_drafts()) return;
  const size_t width = static_cast<size_t>(model_->mtp_hidden_width());  // floats per hidden row
  if (static_cast<size_t>(mtp_n_) <= tokens_.size()) {
    // Keep the hidden inputs of rows [mtp_n_, tokens_.size()] (mtp_hidden_'s invariant).
    mtp_hidden_.resize((tokens_.size() - static_cast<size_t>(mtp_n_) + 1) * width);
    if (model_->mtp_n_past() > mtp_n_) model_->mtp_truncate(mtp_n_);  // draft rows past the true ones
  } else {
    // The head has seen rows past the new end and the hidden state it would
    // need there is gone: evaluate everything again.
    pending_.insert(pending_.begin(), tokens_.begin(), tokens_.end());
    tokens_.clear();
    model_->reset();
    mtp_n_ = 0;
    mtp_hidden_.assign(width, 0.0f);
  }
}

void Session::set_mtp(const MtpOptions& o) {
  if (o.depth < 0) throw Error("--mtp: draft depth must be >= 0 (got " + std::to_string(o.depth) + ")");
  if (o.ngram < 0) throw Error("--ngram: the lookup length must be >= 0 (got " + std::to_string(o.ngram) + ")");
  if (o.ngram > 0 && o.depth == 0) throw Error("--ngram: needs drafts per step >= 1 (--ngram-draft)");
  if (o.depth > 0 && o.ngram == 0 && !model_->has_mtp())
    throw Error("--mtp: the model was loaded without a NextN/MTP head");
  if (o.depth > 0 && o.ngram == 0 && (!tokens_.empty() || !pending_.empty()))
    throw Error("--mtp: set before the first evaluation");  // the head has seen no hidden states
  if (!(o.p_min >= 0.0f && o.p_min <= 1.0f)) throw Error("--mtp-p-min: must be in [0, 1]");
  if (o.window < 1) throw Error("--mtp auto: window must be >= 1");
  mtp_ = o;
  mtp_counters_ = telemetry::MtpCounters{};
  mtp_counters_.depth = o.depth;
  mtp_counters_.drafted_at.assign(static_cast<size_t>(o.depth), 0);
  mtp_counters_.accepted_at.assign(static_cast<size_t>(o.depth), 0);
  mtp_n_ = 0;
  mtp_counters_.ngram = o.ngram;
  if (head_drafts()) mtp_hidden_.assign(static_cast<size_t>(model_->mtp_hidden_width()), 0.0f);
}

void Session::sync_model() {
  const int n = static_cast<int>(tokens_.size());
  if (model_->n_past() > n) model_->truncate(n);
  const int r = model_->n_past();
  if (r >= n) return;
  // A rollback fell back to a checkpoint at r: the history has the tokens.
  // Their logits are not needed (nor their hidden states: mtp_hidden_ still
  // holds those of the rows the head has not seen).
  std::vector<float> scratch(static_cast<size_t>(n_vocab()));
  model_->eval_last(std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(r)), r, scratch.data());
  recomputed_tokens_ += static_cast<uint64_t>(n - r);
}

std::span<const float> Session::feed(std::span<const int32_t> tokens) {
  const bool prefill = tokens_.empty() || pending_.size() + tokens.size() > 1;
  return feed_as(tokens, prefill ? telemetry::EvalKind::Prefill : telemetry::EvalKind::Decode);
}

std::span<const float> Session::feed_as(std::span<const int32_t> tokens, telemetry::EvalKind kind) {
  // The last token sampled by generate() was never evaluated: it goes first.
  std::vector<int32_t> all(pending_.begin(), pending_.end());
  all.insert(all.end(), tokens.begin(), tokens.end());
  if (all.empty()) throw Error("feed: no tokens");
  const int pos = static_cast<int>(tokens_.size());
  recorder_.begin(*model_);
  sync_model();  // inside the record: its cost is this evaluation's
  if (head_drafts()) {  // keep the hidden states the NextN head will need
    const size_t width = static_cast<size_t>(model_->mtp_hidden_width());  // floats per hidden row
    std::vector<float> hidden(all.size() * width);
    model_->eval_hidden(all, pos, logits_.data(), hidden.data(), false);
    mtp_hidden_.insert(mtp_hidden_.end(), hidden.begin(), hidden.end());
  } else {
    model_->eval_last(all, pos, logits_.data());
  }
  pending_.clear();
  tokens_.insert(tokens_.end(), all.begin(), all.end());
  // Last: a throwing record callback (e.g. --csv write error) leaves the
  // session consistent.
  recorder_.end(*model_, kind, static_cast<int>(all.size()), pos);
  return logits_;
}

void Session::prefill_for_generate(std::span<const int32_t> prompt, GenerationStats& st) {
  const int n_new = static_cast<int>(pending_.size() + prompt.size());
  if (n_new == 0) throw Error("generate: empty prompt");
  const auto t0 = std::chrono::steady_clock::now();
  feed_as(prompt, telemetry::EvalKind::Prefill);
  model_->checkpoint();  // the end of a prompt: a later rollback lands here at worst
  st.prefill_tokens = n_new;
  st.prefill_seconds = seconds_since(t0);
}

GenerationStats Session::generate(std::span<const int32_t> prompt, int n_predict, Sampler& sampler,
                                  const std::function<bool(int32_t)>& on_token, std::span<const int32_t> stop_ids) {
  // A constrained or observed sampler is asked token by token (the
  // speculative path draws from distributions the constraint does not see).
  if (mtp_.depth > 0 && !sampler.token_by_token()) return generate_mtp(prompt, n_predict, sampler, on_token, stop_ids);
  GenerationStats st;
  const auto t_start = std::chrono::steady_clock::now();
  prefill_for_generate(prompt, st);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int32_t> history = tokens_;
  for (int i = 0; n_predict < 0 || i < n_predict; ++i) {
    const int32_t id = sampler.sample(logits_, history);
    if (id < 0) break;  // a constraint allows no token: nothing to hand on
    history.push_back(id);
    if (++st.generated == 1) {
      st.ttft_seconds = seconds_since(t_start);
      if (ttft_ms_ == 0) ttft_ms_ = st.ttft_seconds * 1e3;
    }
    const bool more = on_token ? on_token(id) : true;
    if (!more || std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end() || i + 1 == n_predict) {
      pending_.push_back(id);  // evaluated lazily by the next call
      break;
    }
    if (static_cast<int>(tokens_.size()) >= model_->n_ctx()) {  // no room to evaluate it
      pending_.push_back(id);
      st.context_full = true;
      break;
    }
    const int32_t one[1] = {id};
    feed_as(one, telemetry::EvalKind::Decode);
    ++st.decode_tokens;
  }
  st.decode_seconds = seconds_since(t0);
  model_->checkpoint();  // the end of a turn (the pending token is not evaluated yet)
  return st;
}

void Session::eval_all(std::span<const int32_t> tokens, float* logits_out) {
  if (!pending_.empty()) throw Error("eval_all: a sampled token is pending; call feed() first");
  if (tokens.empty()) throw Error("eval_all: no tokens");
  const int pos = static_cast<int>(tokens_.size());
  recorder_.begin(*model_);
  sync_model();
  if (head_drafts()) {
    const size_t width = static_cast<size_t>(model_->mtp_hidden_width());  // floats per hidden row
    std::vector<float> hidden(tokens.size() * width);
    model_->eval_hidden(tokens, pos, logits_out, hidden.data(), true);
    mtp_hidden_.insert(mtp_hidden_.end(), hidden.begin(), hidden.end());
  } else {
    model_->eval(tokens, pos, logits_out);
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  model_->checkpoint();  // the end of a prompt, as in feed()
  // feed()'s logits_ would otherwise be stale: keep it the last row.
  std::copy_n(logits_out + (tokens.size() - 1) * logits_.size(), logits_.size(), logits_.begin());
  recorder_.end(*model_, telemetry::EvalKind::Prefill, static_cast<int>(tokens.size()), pos);
}

telemetry::RunSummary Session::summary(const telemetry::SummaryOptions& opts) const {
  const model::HParams& hp = model_->hparams();
  telemetry::SummaryInput in;
  in.records = recorder_.records();
  in.stats = model_->stats();
  in.moe_layers.resize(hp.n_layer);
  for (uint32_t il = 0; il < hp.n_layer; ++il)
    in.moe_layers[il] = {.expert_bytes = model_->expert_bytes(static_cast<int>(il)),
                         .n_expert = static_cast<int>(hp.n_expert),
                         .top_k = static_cast<int>(hp.n_expert_used)};
  in.ttft_ms = ttft_ms_;
  in.recomputed_tokens = recomputed_tokens_;
  in.mtp = mtp_counters_;
  in.dense_resident_frac = model_->dense_resident_fraction();
  in.peak_rss_mib = peak_rss_mib();
  in.opts = opts;
  return summarize(in);
}

}  // namespace sluice::runtime
