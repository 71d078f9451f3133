#include "server/engine.h"

#include <algorithm>
#include <optional>
#include <random>

#include "runtime/json_prefix.h"
#include "runtime/json_schema_prefix.h"
#include "runtime/text_stream.h"
#include "util/error.h"

namespace sluice::server {
namespace {
constexpr size_t kJsonMaxBlankRun = 20;
// A schema's document: one newline and an indent per run at most (small
// models otherwise fill every gap with blank lines up to the cap).
constexpr size_t kSchemaMaxBlankRun = 8;
}  // namespace

Engine::Engine(runtime::Session& session, ChatRenderer renderer)
    : session_(session),
      tok_(tokenizer::Tokenizer::from_gguf(session.gguf().metadata())),
      renderer_(std::move(renderer)),
      n_ctx_(session.model().n_ctx()) {
  metrics_.run = session_.summary();
}

std::vector<int32_t> Engine::tokenize_prompt(const GenerationRequest& r, std::string* rendered) const {
  // A count the context can never hold is the client's mistake, not a silent
  // cap (a count that only the prompt leaves no room for still ends "length").
  if (!r.max_tokens_field.empty() && r.max_tokens > n_ctx_)
    throw RequestError("'" + r.max_tokens_field + "' is " + std::to_string(r.max_tokens) + "; the context holds " +
                       std::to_string(n_ctx_) + " tokens (-1: until the context is full)");
  std::vector<int32_t> ids;
  if (rendered) rendered->clear();
  if (r.prompt_ids) {
    ids = *r.prompt_ids;
    for (int32_t id : ids)
      if (id < 0 || id >= tok_.n_vocab())
        throw RequestError("'prompt' has token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                           std::to_string(tok_.n_vocab()) + ")");
  } else if (r.prompt_text) {
    ids = tok_.encode(*r.prompt_text, true, false);
  } else {
    if (!renderer_) throw Error("chat request without a chat-template renderer");
    const std::string text = renderer_(r.messages, r.tools, true) + r.assistant_prefix;
    // Templates usually write the BOS text themselves: parse specials, and
    // drop the second BOS when the tokenizer also adds one.
    ids = tok_.encode(text, true, true);
    if (rendered) *rendered = text;
    if (ids.size() >= 2 && tok_.bos() >= 0 && ids[0] == tok_.bos() && ids[1] == tok_.bos()) ids.erase(ids.begin());
  }
  if (ids.empty()) throw RequestError("the prompt is empty (it tokenizes to nothing)");
  if (static_cast<int64_t>(ids.size()) >= n_ctx_)
    throw RequestError("the prompt is " + std::to_string(ids.size()) + " tokens; the context holds " +
                       std::to_string(n_ctx_) + " (the prompt must leave room for one generated token)");
  return ids;
}

GenerationResult Engine::generate(const GenerationRequest& r, const std::vector<int32_t>& prompt,
                                  const std::function<bool(const std::string&)>& on_text,
                                  const std::function<void(const runtime::TokenLogprob&)>& on_logprob) {
  WorkQueue::Turn turn = queue_.wait();
  busy_ = true;
  GenerationResult res;
  res.prompt_tokens = static_cast<int>(prompt.size());
  try {
    // Keep the KV rows of the prefix this prompt shares with what is cached,
    // but evaluate at least the last prompt token (its logits are needed).
    const size_t keep = std::min(session_.common_prefix(prompt), prompt.size() - 1);
    session_.rewind(keep);
    res.cached_tokens = static_cast<int>(keep);

    const int room = n_ctx_ - static_cast<int>(prompt.size());  // > 0, checked by tokenize_prompt
    const int n_predict = r.max_tokens < 0 ? room : std::min(r.max_tokens, room);
    runtime::TextStream stream(r.stop);
    bool cancelled = false, eog = false, json_done = false, stuck = false;
    const bool constrained = r.json_object || r.json_schema;
    if (n_predict > 0) {
      runtime::SamplerConfig sc = r.sampler;
      if (r.random_seed) sc.seed = std::random_device{}();
      runtime::Sampler sampler(sc);
      // The JSON text so far (r.json_object). Whitespace runs are capped as
      // llama.cpp's JSON grammar caps them: a model may not pad forever.
      // With a schema (r.json_schema) the text must stay a prefix of a
      // document it accepts instead.
      runtime::JsonPrefix json(kJsonMaxBlankRun);
      std::optional<runtime::SchemaPrefix> schema;
      if (r.json_schema) schema.emplace(r.json_schema, kSchemaMaxBlankRun);
      auto json_complete = [&] { return schema ? schema->complete() : json.complete(); };
      auto json_push = [&](const std::string& piece) { return schema ? schema->push(piece) : json.push(piece); };
      if (constrained) {
        sampler.set_constraint([&](int32_t id) {
          if (tok_.is_eog(id)) return json_complete();
          if (tok_.is_control(id)) return false;
          const std::string piece = tok_.token_to_piece(id, false);
          if (piece.empty()) return false;  // no progress: could repeat forever
          if (schema) {
            runtime::SchemaPrefix next = *schema;
            return next.push(piece);
          }
          runtime::JsonPrefix next = json;
          return next.push(piece);
        });
      }
      runtime::TokenLogprob last_lp;  // of the token sample() just returned
      if (r.logprobs >= 0)
        sampler.set_observer([&](std::span<const float> logits, int32_t id) {
          last_lp = runtime::token_logprob(logits, id, r.logprobs);
        });
      const std::span<const int32_t> suffix(prompt.data() + keep, prompt.size() - keep);
      const runtime::GenerationStats st = session_.generate(suffix, n_predict, sampler, [&](int32_t id) {
        ++res.completion_tokens;
        if (tok_.is_eog(id)) {
          eog = true;
          return false;
        }
        if (r.logprobs >= 0) {
          if (on_logprob) on_logprob(last_lp);
          res.logprobs.push_back(std::move(last_lp));
        }
        const std::string piece = tok_.token_to_piece(id, false);
        if (constrained) json_done = json_push(piece) && json_complete();
        const std::string out = stream.push(piece);
        res.text += out;
        if (!out.empty() && !on_text(out)) {
          cancelled = true;
          return false;
        }
        return !stream.stopped() && !json_done;
      });
      // The only other way generate() ends early: the constraint allowed no token.
      stuck = constrained && !cancelled && !eog && !json_done && !stream.stopped() && !st.context_full &&
              res.completion_tokens < n_predict;
    }
    if (stuck)
      res.notice = std::string("response_format: no token of the vocabulary continues the JSON ") +
                   (r.json_schema ? "the schema asks for" : "object") + "; generation ended early";
    if (cancelled) {
      res.finish_reason = "cancelled";
    } else if (eog || stream.stopped() || json_done || stuck) {
      res.finish_reason = "stop";
      res.stopped_by_string = stream.stopped();
    } else {
      res.finish_reason = "length";
    }
    if (!cancelled && !stream.stopped()) {
      const std::string rest = stream.finish();
      res.text += rest;
      if (!rest.empty() && !on_text(rest)) res.finish_reason = "cancelled";
    }
  } catch (...) {
    session_.reset();
    std::lock_guard lk(metrics_mu_);
    ++metrics_.requests;
    ++metrics_.requests_failed;
    metrics_.prompt_tokens += static_cast<uint64_t>(res.prompt_tokens);
    metrics_.run = session_.summary();
    busy_ = false;
    throw;
  }
  const runtime::RunSummary summary = session_.summary();
  std::lock_guard lk(metrics_mu_);
  ++metrics_.requests;
  if (res.finish_reason == "cancelled") ++metrics_.requests_cancelled;
  metrics_.prompt_tokens += static_cast<uint64_t>(res.prompt_tokens);
  metrics_.cached_prompt_tokens += static_cast<uint64_t>(res.cached_tokens);
  metrics_.completion_tokens += static_cast<uint64_t>(res.completion_tokens);
  metrics_.run = summary;
  busy_ = false;
  return res;
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lk(metrics_mu_);
  EngineMetrics m = metrics_;
  m.queue_depth = queue_.waiting();
  m.busy = busy_;
  return m;
}

}  // namespace sluice::server
