#include "server/engine.h"

#include <algorithm>
#include <filesystem>

#include "util/error.h"

namespace sluice::server {
Engine::Engine(runtime::Session& session, ChatRenderer renderer, int max_queue, int prefill_chunk)
    : identity_(runtime::slot_identity(session.gguf(), session.model())),
      model_files_(session.gguf().paths()),
      tok_(tokenizer::Tokenizer::from_gguf(session.gguf().metadata())),
      renderer_(std::move(renderer)),
      n_ctx_(session.model().n_ctx()),
      max_queue_(max_queue),
      n_slots_(session.model().n_slots()),
      sched_(session, tok_, max_queue, prefill_chunk) {}

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

std::shared_ptr<Job> Engine::submit(const GenerationRequest& r, const std::vector<int32_t>& prompt) {
  auto job = std::make_shared<Job>();
  job->req = r;
  job->prompt = prompt;
  sched_.submit(job);
  return job;
}

std::vector<std::shared_ptr<Job>> Engine::submit_choices(const GenerationRequest& r,
                                                          const std::vector<int32_t>& prompt) {
  std::vector<std::shared_ptr<Job>> jobs;
  for (int i = 0; i < std::max(1, r.n); ++i) {
    auto job = std::make_shared<Job>();
    job->req = r;
    if (!r.random_seed) job->req.sampler.seed = r.sampler.seed + static_cast<uint64_t>(i);
    job->prompt = prompt;
    if (i > 0) job->leader = jobs[0];
    jobs.push_back(std::move(job));
  }
  jobs[0]->has_followers = jobs.size() > 1;
  sched_.submit_group(jobs);
  return jobs;
}

GenerationResult Engine::wait(const std::shared_ptr<Job>& job,
                              const std::function<bool(const std::string&)>& on_text,
                              const std::function<void(const runtime::TokenLogprob&)>& on_logprob,
                              bool every_token) {
  bool gone = false;  // on_text said the client went away: the scheduler drops the request at its next step
  std::unique_lock lk(job->mu);
  for (;;) {
    job->cv.wait(lk, [&] { return job->done || !job->chunks.empty(); });
    std::vector<Emitted> chunks = std::move(job->chunks);
    job->chunks.clear();
    const bool done = job->done;
    lk.unlock();
    for (const Emitted& c : chunks) {
      if (gone) break;
      if (c.logprob && on_logprob) on_logprob(*c.logprob);
      if ((!c.text.empty() || (every_token && c.logprob)) && !on_text(c.text)) {
        gone = true;
        job->cancelled = true;
        sched_.wake();
      }
    }
    lk.lock();
    if (done && job->chunks.empty()) break;
  }
  if (job->error) std::rethrow_exception(job->error);
  GenerationResult res = job->result;
  if (gone) res.finish_reason = "cancelled";
  return res;
}

GenerationResult Engine::generate(const GenerationRequest& r, const std::vector<int32_t>& prompt,
                                  const std::function<bool(const std::string&)>& on_text,
                                  const std::function<void(const runtime::TokenLogprob&)>& on_logprob) {
  return wait(submit(r, prompt), on_text, on_logprob);
}

Engine::SlotFileResult Engine::save_slot(int slot, const std::string& path) {
  SlotFileResult r;
  sched_.with_free_slot(slot, [&](model::Model& m, std::vector<int32_t>& cached) {
    runtime::save_slot(path, m, identity_, slot, cached, model_files_);
    r.tokens = static_cast<int>(cached.size());
  });
  std::error_code ec;
  r.bytes = std::filesystem::file_size(path, ec);
  return r;
}

Engine::SlotFileResult Engine::restore_slot(int slot, const std::string& path) {
  SlotFileResult r;
  sched_.with_free_slot(slot, [&](model::Model& m, std::vector<int32_t>& cached) {
    cached.clear();
    cached = runtime::restore_slot(path, m, identity_, slot);
    r.tokens = static_cast<int>(cached.size());
  });
  std::error_code ec;
  r.bytes = std::filesystem::file_size(path, ec);
  return r;
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m;
  static_cast<SchedulerMetrics&>(m) = sched_.metrics();
  m.max_queue = max_queue_;
  m.busy = m.slots_busy > 0;
  return m;
}

}  // namespace sluice::server
