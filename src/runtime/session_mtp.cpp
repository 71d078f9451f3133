// Session::generate with --mtp or --ngram: draft with the NextN head or by
// prompt lookup, verify with the trunk, emit the accepted prefix (see
// MtpOptions in session.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/ngram_draft.h"
#include "runtime/session.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::runtime {
namespace {

// The draft's own top probability (softmax at temperature 1), whatever the
// sampler does: --mtp-p-min asks how sure the head is.
double top_probability(std::span<const float> logits) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - mx);
  return 1.0 / sum;
}

// --mtp auto: alternates measured windows of drafting on and off and keeps
// the cheaper per emitted token; the losing mode is measured again every
// kReprobe windows, so a change of regime (cache warming, acceptance moving)
// is noticed.
class AutoSwitch {
 public:
  explicit AutoSwitch(const MtpOptions& o) : o_(o) {}
  bool drafting() const { return on_; }
  // Called after each step with the tokens it emitted and its wall time.
  // Returns true when the mode changed.
  bool step(int emitted, double seconds) {
    if (!o_.automatic) return false;
    tokens_ += emitted;
    seconds_ += seconds;
    if (tokens_ < o_.window) return false;
    const double rate = seconds_ / tokens_;  // seconds per emitted token
    (on_ ? on_rate_ : off_rate_) = rate;
    tokens_ = 0;
    seconds_ = 0;
    ++windows_;
    bool want = on_;
    if (on_rate_ < 0 || off_rate_ < 0) {
      want = !on_;  // measure the mode not measured yet
    } else if (windows_ % kReprobe == 0) {
      want = !on_;  // re-measure the other mode now and then
    } else {
      want = on_rate_ <= off_rate_;
    }
    if (want == on_) return false;
    if (o_.log) {
      auto ms = [](double r) {
        if (r < 0) return std::string("not measured");
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f ms", r * 1e3);
        return std::string(buf);
      };
      o_.log(std::string("mtp auto: drafting ") + (want ? "on" : "off") + " (per emitted token: " + ms(on_rate_) +
             " with drafts, " + ms(off_rate_) + " without, windows of " + std::to_string(o_.window) + " tokens)");
    }
    on_ = want;
    return true;
  }

 private:
  static constexpr int kReprobe = 8;
  MtpOptions o_;
  bool on_ = true;
  int tokens_ = 0;
  double seconds_ = 0;
  double on_rate_ = -1, off_rate_ = -1;
  int windows_ = 0;
};

}  // namespace

void Session::mtp_catch_up_and_draft(int32_t next) {
  const size_t width = static_cast<size_t>(model_->mtp_hidden_width());  // floats per hidden row
  const int P = static_cast<int>(tokens_.size());
  // Rows q in [mtp_n_, P]: the evaluated tokens the head has not seen, then
  // (next, h_{P-1}) whose logits are the first draft.
  std::vector<int32_t> rows(tokens_.begin() + mtp_n_, tokens_.end());
  rows.push_back(next);
  if (mtp_hidden_.size() != rows.size() * width)
    throw Error("internal: MTP hidden states out of step (" + std::to_string(mtp_hidden_.size() / width) +
                " rows for " + std::to_string(rows.size()) + " tokens)");
  std::vector<float> g(rows.size() * width);
  mtp_logits_.resize(static_cast<size_t>(n_vocab()));
  recorder_.begin(*model_);
  if (model_->mtp_n_past() > mtp_n_) model_->mtp_truncate(mtp_n_);  // the last step's draft rows
  model_->mtp_eval(rows, mtp_hidden_.data(), mtp_n_, mtp_logits_.data(), g.data(), false);
  recorder_.end(*model_, telemetry::EvalKind::Draft, static_cast<int>(rows.size()), mtp_n_, 0);
  mtp_g_.assign(g.end() - static_cast<std::ptrdiff_t>(width), g.end());
  mtp_n_ = P + 1;  // row P holds `next`, which is emitted: a true row
  mtp_hidden_.clear();
}

void Session::mtp_draft_step(int32_t token, int pos) {
  std::vector<float> g(mtp_g_.size());
  const int32_t one[1] = {token};
  recorder_.begin(*model_);
  model_->mtp_eval(one, mtp_g_.data(), pos, mtp_logits_.data(), g.data(), false);
  recorder_.end(*model_, telemetry::EvalKind::Draft, 1, pos, 0);
  mtp_g_ = std::move(g);
}

GenerationStats Session::generate_mtp(std::span<const int32_t> prompt, int n_predict, Sampler& sampler,
                                      const std::function<bool(int32_t)>& on_token,
                                      std::span<const int32_t> stop_ids) {
  GenerationStats st;
  const auto t_start = std::chrono::steady_clock::now();
  prefill_for_generate(prompt, st);
  const auto t0 = std::chrono::steady_clock::now();
  if (n_predict == 0) return st;

  const size_t nv = static_cast<size_t>(n_vocab());
  const size_t width = static_cast<size_t>(model_->mtp_hidden_width());  // floats per hidden row
  std::vector<int32_t> history = tokens_;
  // Hands one token to the caller; false when generation stops at it.
  auto emit = [&](int32_t id) {
    history.push_back(id);
    if (++st.generated == 1) {
      st.ttft_seconds = seconds_since(t_start);
      if (ttft_ms_ == 0) ttft_ms_ = st.ttft_seconds * 1e3;
    }
    const bool more = on_token ? on_token(id) : true;
    return more && std::find(stop_ids.begin(), stop_ids.end(), id) == stop_ids.end() &&
           (n_predict < 0 || st.generated < n_predict);
  };

  AutoSwitch auto_switch(mtp_);
  int32_t decided = -1;  // the next token, when a rejection already drew it (-1: none)
  for (;;) {
    const auto t_step = std::chrono::steady_clock::now();
    const int P = static_cast<int>(tokens_.size());
    const int32_t t = decided >= 0 ? decided : sampler.sample(logits_, history);
    decided = -1;
    if (!emit(t)) {
      pending_.push_back(t);  // evaluated lazily by the next call
      break;
    }
    if (P >= model_->n_ctx()) {  // no room to evaluate it
      pending_.push_back(t);
      st.context_full = true;
      break;
    }

    // Draft up to depth tokens (the verify batch must fit the context).
    const int room = model_->n_ctx() - P - 1;
    const int depth = auto_switch.drafting() ? std::min(mtp_.depth, room) : 0;
    std::vector<int32_t> drafts;
    std::vector<TokenDist> qs;
    if (depth > 0 && mtp_.ngram > 0) {
      drafts = ngram_draft(history, mtp_.ngram, depth);  // history ends with t
      for (int32_t d : drafts) qs.push_back(TokenDist{{d}, {1.0}, 1.0});  // a certain guess: q(d) = 1
      if (drafts.empty()) ++mtp_counters_.plain_steps;
    } else if (depth > 0) {
      mtp_catch_up_and_draft(t);
      std::vector<int32_t> draft_history = history;
      for (int i = 0; i < depth; ++i) {
        if (i > 0) mtp_draft_step(drafts.back(), P + i);
        if (mtp_.p_min > 0 && top_probability(mtp_logits_) < mtp_.p_min) break;
        TokenDist q = sampler.distribution(mtp_logits_, draft_history);
        const int32_t d = sampler.draw(q);
        drafts.push_back(d);
        qs.push_back(std::move(q));
        draft_history.push_back(d);
      }
    } else {
      ++mtp_counters_.plain_steps;
    }

    // Verify [t, drafts] in one trunk forward (a plain decode without drafts).
    const int k = static_cast<int>(drafts.size());
    std::vector<int32_t> batch{t};
    batch.insert(batch.end(), drafts.begin(), drafts.end());
    verify_logits_.resize(batch.size() * nv);
    verify_hidden_.resize(batch.size() * width);
    recorder_.begin(*model_);
    sync_model();
    // A verify batch with j of k drafts accepted is truncated back to P + 1 + j:
    // a recurrent model restores the row checkpoint there (P + 1 .. P + k), or
    // falls back to the one at P when the eval was split and missed it.
    if (k > 0) {
      model_->checkpoint();
      model_->checkpoint_rows(k);
    }
    model_->eval_hidden(batch, P, verify_logits_.data(), verify_hidden_.data(), true);
    // Every draft costs its verify row, accepted or not.
    mtp_counters_.drafted += static_cast<uint64_t>(k);
    for (int i = 0; i < k; ++i) ++mtp_counters_.drafted_at[static_cast<size_t>(i)];
    std::vector<int32_t> accepted;
    std::vector<int32_t> verify_history = history;
    for (int i = 0; i < k; ++i) {
      const std::span<const float> row(&verify_logits_[static_cast<size_t>(i) * nv], nv);
      const TokenDist p = sampler.distribution(row, verify_history);
      bool ok = false;
      const int32_t y = sampler.accept_or_resample(p, qs[static_cast<size_t>(i)], drafts[static_cast<size_t>(i)], ok);
      if (!ok) {
        decided = y;
        break;
      }
      ++mtp_counters_.accepted;
      ++mtp_counters_.accepted_at[static_cast<size_t>(i)];
      accepted.push_back(drafts[static_cast<size_t>(i)]);
      verify_history.push_back(drafts[static_cast<size_t>(i)]);
    }
    if (k > 0) ++mtp_counters_.steps;
    recorder_.end(*model_, k > 0 ? telemetry::EvalKind::Verify : telemetry::EvalKind::Decode, k + 1, P,
                  1 + static_cast<int>(accepted.size()));
    st.decode_tokens += 1 + static_cast<int>(accepted.size());

    // Emit the accepted drafts; stop part-way if the caller or a limit says so.
    size_t kept = accepted.size();
    bool stop = false;
    for (size_t i = 0; i < accepted.size(); ++i) {
      if (!emit(accepted[i])) {
        kept = i;
        stop = true;
        break;
      }
    }
    // The trunk has evaluated t and the kept drafts: the rejected rows are
    // truncated now (a recurrent model may fall back further; sync_model
    // re-evaluates before the next forward). The head's rows follow mtp_n_'s
    // invariant (its draft rows are truncated before its next eval).
    tokens_.push_back(t);
    tokens_.insert(tokens_.end(), accepted.begin(), accepted.begin() + static_cast<std::ptrdiff_t>(kept));
    model_->truncate(static_cast<int>(tokens_.size()));
    const auto hidden_rows = [&](size_t n) {
      return std::vector<float>(verify_hidden_.begin(), verify_hidden_.begin() + static_cast<std::ptrdiff_t>(n * width));
    };
    if (!head_drafts()) {
      // --ngram: the head's hidden states are not kept.
    } else if (depth > 0) {
      mtp_hidden_ = hidden_rows(kept + 1);  // h_P .. h_{P+kept}: rows P+1 .. P+kept+1
    } else {
      const std::vector<float> h = hidden_rows(1);
      mtp_hidden_.insert(mtp_hidden_.end(), h.begin(), h.end());
    }
    if (stop) {
      // The last emitted draft becomes the pending token, as in plain decode.
      pending_.push_back(accepted[kept]);
      break;
    }
    std::copy_n(&verify_logits_[kept * nv], nv, logits_.begin());
    if (auto_switch.step(1 + static_cast<int>(kept), seconds_since(t_step))) ++mtp_counters_.switches;
  }
  st.decode_seconds = seconds_since(t0);
  model_->checkpoint();  // the end of a turn, as in plain generate()
  return st;
}

}  // namespace sluice::runtime
