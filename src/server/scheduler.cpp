#include "server/scheduler.h"

#include <algorithm>
#include <new>
#include <random>

#include "grammar/json_prefix.h"
#include "grammar/json_schema_prefix.h"
#include "runtime/sampler.h"
#include "runtime/text_stream.h"
#include "util/error.h"

namespace sluice::server {
namespace {
// JSON whitespace runs are capped as llama.cpp's JSON grammar caps them: a
// model may not pad forever.
constexpr size_t kJsonMaxBlankRun = 20;
// A schema's document: one newline and an indent per run at most (small
// models otherwise fill every gap with blank lines up to the cap).
constexpr size_t kSchemaMaxBlankRun = 8;

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}
}  // namespace

// One sequence slot: the tokens its model state holds, and the request it runs.
struct Scheduler::Slot {
  std::vector<int32_t> cached;  // tokens the model slot holds (== slot_n_past)
  std::shared_ptr<Job> job;     // null: free
  std::vector<int32_t> input;   // to evaluate: the prompt's rest, or the last sampled token
  size_t input_done = 0;        // of input, evaluated
  bool prompt = true;           // input is the prompt
  int n_predict = 0;
  std::unique_ptr<runtime::Sampler> sampler;
  std::unique_ptr<runtime::TextStream> stream;
  std::unique_ptr<grammar::JsonPrefix> json;  // the JSON text so far (req.json_object)
  std::unique_ptr<grammar::SchemaPrefix> schema;  // the same against req.json_schema
  runtime::TokenLogprob last_lp;                  // of the token the sampler just returned (req.logprobs >= 0)
  std::vector<int32_t> history;               // prompt + sampled: the repetition penalty's view
  std::vector<float> logits;
  bool eog = false, json_done = false;
  bool sample_first = false;  // the state is the leader's prompt copy: sample from `logits` before evaluating
  uint64_t last_used = 0;  // admission number of its latest request (0: never used)
};

Scheduler::Scheduler(runtime::Session& session, const tokenizer::Tokenizer& tok, int max_queue,
                     int prefill_chunk)
    : session_(session),
      model_(session.model()),
      tok_(tok),
      max_queue_(static_cast<size_t>(std::max(0, max_queue))),
      prefill_chunk_(std::max(1, prefill_chunk)),
      n_ctx_(session.model().n_ctx()),
      memory_{session.model().slot_state_bytes().total(), session.model().slot_state_budget(),
              session.model().n_ctx()} {
  // The session's own history is not kept in step with slot 0: start clean.
  session_.reset();
  for (int i = 0; i < model_.n_slots(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
    model_.slot_reset(i);
  }
  metrics_.slots = model_.n_slots();
  metrics_.state_budget = memory_.budget;
  count_state();
  metrics_.run = session_.summary();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Scheduler::submit(std::shared_ptr<Job> job) { submit_group({std::move(job)}); }

void Scheduler::submit_group(const std::vector<std::shared_ptr<Job>>& jobs) {
  {
    std::lock_guard lk(mu_);
    if (stop_) throw Error("serve: the server is stopping");
    if (memory_.slots_that_fit() == 0) {  // never fits, whatever ends: refused before it queues
      ++metrics_.requests_rejected_memory;
      throw MemoryBudgetError(memory_.refusal(0));
    }
    const size_t free = static_cast<size_t>(metrics_.slots - metrics_.slots_busy);
    if (queue_.size() + jobs.size() > free + max_queue_) {
      ++metrics_.requests_rejected;
      throw QueueFullError("the server is busy: " + std::to_string(metrics_.slots) +
                           " slots (--parallel) and " + std::to_string(max_queue_) +
                           " queued requests (--max-queue) are taken; retry later");
    }
    queue_.insert(queue_.end(), jobs.begin(), jobs.end());
    metrics_.queue_depth = queue_.size();
  }
  cv_.notify_all();
}

void Scheduler::wake() {
  { std::lock_guard lk(mu_); }
  cv_.notify_all();
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard lk(mu_);
  return metrics_;
}

void Scheduler::with_free_slot(int slot, const std::function<void(model::Model&, std::vector<int32_t>&)>& fn) {
  if (slot < 0 || slot >= static_cast<int>(slots_.size()))
    throw RequestError("slot id " + std::to_string(slot) + " is out of range [0, " + std::to_string(slots_.size()) +
                       ") (--parallel)");
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  {
    std::lock_guard lk(mu_);
    if (stop_) throw Error("serve: the server is stopping");
    tasks_.push_back([this, slot, &fn, done] {
      Slot& sl = *slots_[static_cast<size_t>(slot)];
      try {
        if (sl.job) throw SlotBusyError("slot " + std::to_string(slot) + " is processing a request; retry when it is idle");
        if (!model_.slot_allocated(slot)) {  // a restore needs its memory; a save of an empty slot too
          std::lock_guard lk(mu_);
          std::string why;
          const int had = slot_with_state(slot, why);
          if (had < 0) throw MemoryBudgetError(memory_.refusal(state_in_use(), why));
          if (had != slot) {  // an idle slot's cached state gives way to this one
            model_.slot_release(had);
            slots_[static_cast<size_t>(had)]->cached.clear();
            try {
              model_.slot_allocate(slot);
            } catch (const std::bad_alloc&) {
              count_state();
              throw MemoryBudgetError(memory_.refusal(state_in_use(), "the system had no memory for it"));
            }
          }
          count_state();
        }
        try {
          fn(model_, sl.cached);
        } catch (...) {
          model_.slot_reset(slot);  // its state is unknown now
          sl.cached.clear();
          throw;
        }
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
  cv_.notify_all();
  try {
    f.get();
  } catch (const std::future_error&) {
    throw Error("serve: the server stopped");
  }
}

std::vector<SlotInfo> Scheduler::slots_info() {
  auto done = std::make_shared<std::promise<std::vector<SlotInfo>>>();
  auto f = done->get_future();
  {
    std::lock_guard lk(mu_);
    if (stop_) throw Error("serve: the server is stopping");
    tasks_.push_back([this, done] {
      std::vector<SlotInfo> out;
      for (size_t s = 0; s < slots_.size(); ++s)
        out.push_back({static_cast<int>(s), model_.slot_n_past(static_cast<int>(s)), slots_[s]->job != nullptr});
      done->set_value(std::move(out));
    });
  }
  cv_.notify_all();
  try {
    return f.get();
  } catch (const std::future_error&) {
    throw Error("serve: the server stopped");
  }
}

void Scheduler::run_tasks(std::deque<std::function<void()>> tasks) {
  for (auto& t : tasks) t();
}

void Scheduler::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty() || !tasks_.empty() || metrics_.slots_busy > 0; });
    if (stop_) break;
    if (!tasks_.empty()) {
      std::deque<std::function<void()>> tasks = std::move(tasks_);
      tasks_.clear();
      lk.unlock();
      run_tasks(std::move(tasks));
      lk.lock();
    }
    admit();
    lk.unlock();
    step();
    lk.lock();
  }
  // Stopping: every request still here ends with an error (slot tasks too).
  const auto gone = std::make_exception_ptr(Error("serve: the server stopped"));
  tasks_.clear();  // their promises, destroyed, answer their waiters with broken_promise
  std::deque<std::shared_ptr<Job>> queued = std::move(queue_);
  lk.unlock();
  for (const auto& j : queued) {
    std::lock_guard jl(j->mu);
    j->error = gone;
    j->done = true;
    j->cv.notify_all();
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s]->job) fail(static_cast<int>(s), gone);
}

void Scheduler::admit() {
  for (size_t q = 0; q < queue_.size();) {
    std::shared_ptr<Job> job = queue_[q];
    // A follower waits until its leader's prompt is evaluated (or the leader ended).
    if (job->leader && !job->leader->prompt_done && !job->leader->ended) {
      ++q;
      continue;
    }
    // The free slot whose cached tokens share the longest prefix with the
    // prompt (among equals the one caching least), when that prefix is at
    // least half of what the slot holds; otherwise reusing it would mostly
    // destroy another conversation's cache: the least recently used free
    // slot then.
    int best = -1, lru = -1;
    size_t best_len = 0;
    for (size_t s = 0; s < slots_.size(); ++s) {
      const Slot& sl = *slots_[s];
      if (sl.job) continue;
      const size_t len = common_prefix(sl.cached, job->prompt);
      if (best < 0 || len > best_len ||
          (len == best_len && sl.cached.size() < slots_[static_cast<size_t>(best)]->cached.size()))
        best = static_cast<int>(s), best_len = len;
      if (lru < 0 || sl.last_used < slots_[static_cast<size_t>(lru)]->last_used)
        lru = static_cast<int>(s);
    }
    if (best < 0) return;
    if (2 * best_len < slots_[static_cast<size_t>(best)]->cached.size()) best = lru;
    std::string why;
    best = slot_with_state(best, why);
    if (best < 0) {
      if (metrics_.slots_busy > 0) return;  // waits (and so does the queue behind it): a running request frees memory
      // Nothing runs and it still cannot have a state: the 503.
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(q));
      metrics_.queue_depth = queue_.size();
      ++metrics_.requests_rejected_memory;
      job->ended = true;  // its followers evaluate the prompt themselves (and meet the same answer)
      std::lock_guard jl(job->mu);
      job->error = std::make_exception_ptr(MemoryBudgetError(memory_.refusal(state_in_use(), why)));
      job->done = true;
      job->cv.notify_all();
      continue;
    }
    slots_[static_cast<size_t>(best)]->last_used = ++admitted_;
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(q));
    metrics_.queue_depth = queue_.size();
    ++metrics_.slots_busy;
    slots_[static_cast<size_t>(best)]->job = job;
    count_state();
    start(best, std::move(job));
  }
}

uint64_t Scheduler::state_in_use() const {
  uint64_t n = 0;
  for (size_t s = 0; s < slots_.size(); ++s) n += model_.slot_allocated(static_cast<int>(s));
  return n * memory_.slot_bytes;
}

void Scheduler::count_state() {
  uint64_t all = 0, busy = 0;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (model_.slot_allocated(static_cast<int>(s))) ++all, busy += slots_[s]->job != nullptr;
  metrics_.state_bytes = all * memory_.slot_bytes;
  metrics_.state_busy_bytes = busy * memory_.slot_bytes;
}

int Scheduler::slot_with_state(int s, std::string& why) {
  if (model_.slot_allocated(s)) return s;
  if (memory_.fits(state_in_use())) {
    try {
      model_.slot_allocate(s);
      return s;
    } catch (const std::bad_alloc&) {
      why = "the system had no memory for it";
    }
  }
  // Every slot's state is alike: the least recently used idle one serves as well.
  int victim = -1;
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& sl = *slots_[v];
    if (sl.job || !model_.slot_allocated(static_cast<int>(v))) continue;
    if (victim < 0 || sl.last_used < slots_[static_cast<size_t>(victim)]->last_used) victim = static_cast<int>(v);
  }
  return victim;
}

void Scheduler::start(int s, std::shared_ptr<Job> job) {
  Slot& sl = *slots_[static_cast<size_t>(s)];
  const GenerationRequest& r = job->req;
  const std::vector<int32_t>& prompt = job->prompt;
  GenerationResult& res = job->result;
  res.prompt_tokens = static_cast<int>(prompt.size());
  job->slot = s;
  sl.sample_first = false;
  if (const Job* lead = job->leader.get();
      lead && lead->prompt_done && lead->slot >= 0 && lead->slot != s &&
      slots_[static_cast<size_t>(lead->slot)]->cached == prompt &&
      model_.slot_n_past(lead->slot) == static_cast<int>(prompt.size())) {
    try {
      // The leader's prompt state and last row: this choice samples its first token from them.
      model_.slot_copy(lead->slot, s);
      sl.cached = prompt;
      sl.sample_first = true;
    } catch (const std::exception&) {  // no memory for the copy: evaluate the prompt instead
      model_.slot_reset(s);
      sl.cached.clear();
    }
  }
  // Keep the state of the prefix this prompt shares with the slot's cache,
  // but evaluate at least the last prompt token (its logits are needed). A
  // recurrent layer may fall back to an earlier checkpoint: the tokens from
  // there are evaluated again (counted).
  // (A choice copied from its leader keeps the whole prompt: its last row's logits came along.)
  const size_t keep = sl.sample_first ? prompt.size() : std::min(common_prefix(sl.cached, prompt), prompt.size() - 1);
  size_t held = keep;
  if (model_.slot_n_past(s) > static_cast<int>(keep))
    held = static_cast<size_t>(model_.slot_truncate(s, static_cast<int>(keep)));
  sl.cached.resize(held);
  res.cached_tokens = static_cast<int>(keep);
  metrics_.recomputed_tokens += keep - held;
  sl.input.assign(prompt.begin() + static_cast<std::ptrdiff_t>(held), prompt.end());
  sl.input_done = 0;
  sl.prompt = true;
  if (sl.sample_first) {
    res.cached_tokens = static_cast<int>(prompt.size());
    sl.input.clear();
    sl.prompt = false;
  }
  const int room = n_ctx_ - static_cast<int>(prompt.size());  // > 0, checked by tokenize_prompt
  sl.n_predict = r.max_tokens < 0 ? room : std::min(r.max_tokens, room);
  runtime::SamplerConfig sc = r.sampler;
  if (r.random_seed) sc.seed = std::random_device{}();
  sl.sampler = std::make_unique<runtime::Sampler>(sc);
  sl.stream = std::make_unique<runtime::TextStream>(r.stop);
  sl.json = std::make_unique<grammar::JsonPrefix>(kJsonMaxBlankRun);
  sl.schema.reset();
  if (r.json_schema) {
    sl.schema = std::make_unique<grammar::SchemaPrefix>(r.json_schema, kSchemaMaxBlankRun);
    grammar::SchemaPrefix* schema = sl.schema.get();
    sl.sampler->set_constraint([this, schema](int32_t id) {
      if (tok_.is_eog(id)) return schema->complete();
      if (tok_.is_control(id)) return false;
      const std::string piece = tok_.token_to_piece(id, false);
      if (piece.empty()) return false;  // no progress: could repeat forever
      grammar::SchemaPrefix next = *schema;
      return next.push(piece);
    });
  } else if (r.json_object) {
    grammar::JsonPrefix* json = sl.json.get();
    sl.sampler->set_constraint([this, json](int32_t id) {
      if (tok_.is_eog(id)) return json->complete();
      if (tok_.is_control(id)) return false;
      const std::string piece = tok_.token_to_piece(id, false);
      if (piece.empty()) return false;  // no progress: could repeat forever
      grammar::JsonPrefix next = *json;
      return next.push(piece);
    });
  }
  if (r.logprobs >= 0) {
    Slot* slot = &sl;
    const int top = r.logprobs;
    sl.sampler->set_observer([slot, top](std::span<const float> logits, int32_t id) {
      slot->last_lp = runtime::token_logprob(logits, id, top);
    });
  }
  sl.history = prompt;
  sl.logits.resize(static_cast<size_t>(model_.hparams().n_vocab));
  if (sl.sample_first) sl.logits = job->leader->prompt_logits;
  sl.eog = sl.json_done = false;
}

void Scheduler::step() {
  std::vector<model::SequenceEval> batch;
  std::vector<int> who;
  bool any_prompt = false;
  for (size_t s = 0; s < slots_.size(); ++s) {
    Slot& sl = *slots_[s];
    if (!sl.job) continue;
    if (sl.job->cancelled) {
      finish(static_cast<int>(s), "cancelled");
      continue;
    }
    if (sl.n_predict <= 0) {  // the prompt fills the context but one position, or max_tokens 0
      finish(static_cast<int>(s), "length");
      continue;
    }
    if (sl.sample_first) {  // a choice started from its leader's prompt state
      sl.sample_first = false;
      next_token(static_cast<int>(s));
      if (!sl.job) continue;
    }
    const size_t left = sl.input.size() - sl.input_done;
    const size_t n = sl.prompt ? std::min(left, static_cast<size_t>(prefill_chunk_)) : left;
    model::SequenceEval e;
    e.slot = static_cast<int>(s);
    e.tokens = std::span<const int32_t>(sl.input.data() + sl.input_done, n);
    e.logits_out = sl.input_done + n == sl.input.size() ? sl.logits.data() : nullptr;
    batch.push_back(e);
    who.push_back(static_cast<int>(s));
    any_prompt = any_prompt || sl.prompt;
  }
  if (batch.empty()) return;
  int rows = 0, emitted = 0;  // emitted: sequences whose input ends here (each samples a token)
  for (const model::SequenceEval& e : batch)
    rows += static_cast<int>(e.tokens.size()), emitted += e.logits_out != nullptr;
  telemetry::TokenRecorder& rec = session_.telemetry();
  try {
    rec.begin(model_);
    model_.eval_batch(batch);
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    for (int s : who) fail(s, e);
    return;
  }
  // Recorded before any request finishes, so its summary includes this step.
  try {
    rec.end(model_, any_prompt ? telemetry::EvalKind::Prefill : telemetry::EvalKind::Decode, rows, 0,
            emitted);
  } catch (...) {  // a record callback's failure is no request's error
  }
  {
    // Published before any request of this step finishes: a client that saw
    // its answer end reads /metrics whose batch figures include this step.
    const model::BatchCounters bc = model_.stats().batch;
    std::lock_guard lk(mu_);
    metrics_.batch = bc;
  }
  for (size_t k = 0; k < batch.size(); ++k) {
    Slot& sl = *slots_[static_cast<size_t>(who[k])];
    sl.cached.insert(sl.cached.end(), batch[k].tokens.begin(), batch[k].tokens.end());
    sl.input_done += batch[k].tokens.size();
    if (sl.input_done < sl.input.size()) continue;
    if (sl.prompt) {
      sl.prompt = false;
      model_.slot_checkpoint(who[k]);  // the end of a prompt: a later rollback lands here at worst
      if (sl.job->has_followers) {
        sl.job->prompt_logits = sl.logits;
        sl.job->prompt_done = true;
      }
    }
    next_token(who[k]);
  }
}

void Scheduler::next_token(int s) {
  Slot& sl = *slots_[static_cast<size_t>(s)];
  Job& job = *sl.job;
  GenerationResult& res = job.result;
  const int32_t id = sl.sampler->sample(sl.logits, sl.history);
  if (id < 0) {  // a constraint allows no token
    res.notice = std::string("response_format: no token of the vocabulary continues the JSON ") +
                 (job.req.json_schema ? "the schema asks for" : "object") + "; generation ended early";
    return finish(s, "stop");
  }
  sl.history.push_back(id);
  ++res.completion_tokens;
  if (tok_.is_eog(id)) {
    sl.eog = true;
    return finish(s, "stop");
  }
  const std::string piece = tok_.token_to_piece(id, false);
  if (sl.schema)
    sl.json_done = sl.schema->push(piece) && sl.schema->complete();
  else if (job.req.json_object)
    sl.json_done = sl.json->push(piece) && sl.json->complete();
  const std::string out = sl.stream->push(piece);
  Emitted e{out, std::nullopt};
  if (job.req.logprobs >= 0) {
    res.logprobs.push_back(sl.last_lp);
    e.logprob = std::move(sl.last_lp);
  }
  if (!out.empty() || e.logprob) {
    res.text += out;
    std::lock_guard jl(job.mu);
    job.chunks.push_back(std::move(e));
    job.cv.notify_all();
  }
  if (sl.stream->stopped() || sl.json_done) return finish(s, "stop");
  if (res.completion_tokens >= sl.n_predict) return finish(s, "length");
  if (static_cast<int>(sl.cached.size()) >= n_ctx_)
    return finish(s, "length");  // no room to evaluate it
  sl.input.assign(1, id);
  sl.input_done = 0;
}

void Scheduler::finish(int s, const char* reason) {
  Slot& sl = *slots_[static_cast<size_t>(s)];
  Job& job = *sl.job;
  GenerationResult& res = job.result;
  res.finish_reason = job.cancelled ? "cancelled" : reason;
  res.stopped_by_string = !job.cancelled && sl.stream->stopped();
  if (!job.cancelled && !sl.stream->stopped()) {
    const std::string rest = sl.stream->finish();
    if (!rest.empty()) {
      res.text += rest;
      std::lock_guard jl(job.mu);
      job.chunks.push_back(Emitted{rest, std::nullopt});
    }
  }
  model_.slot_checkpoint(s);  // the end of a turn
  release(s);
}

void Scheduler::fail(int s, std::exception_ptr e) {
  Slot& sl = *slots_[static_cast<size_t>(s)];
  sl.job->error = std::move(e);
  // The state is unknown: start the slot over, and give its memory back.
  model_.slot_release(s);
  sl.cached.clear();
  release(s);
}

void Scheduler::release(int s) {
  Slot& sl = *slots_[static_cast<size_t>(s)];
  std::shared_ptr<Job> job = std::move(sl.job);
  sl.job.reset();
  sl.sample_first = false;
  job->ended = true;
  sl.sampler.reset();
  const GenerationResult& res = job->result;
  {
    const telemetry::RunSummary summary = session_.summary();
    std::lock_guard lk(mu_);
    --metrics_.slots_busy;
    count_state();
    ++metrics_.requests;
    if (job->error)
      ++metrics_.requests_failed;
    else if (res.finish_reason == "cancelled")
      ++metrics_.requests_cancelled;
    metrics_.prompt_tokens += static_cast<uint64_t>(res.prompt_tokens);
    if (!job->error) {
      metrics_.cached_prompt_tokens += static_cast<uint64_t>(res.cached_tokens);
      metrics_.completion_tokens += static_cast<uint64_t>(res.completion_tokens);
    }
    metrics_.run = summary;
  }
  std::lock_guard jl(job->mu);
  job->done = true;
  job->cv.notify_all();
}

}  // namespace sluice::server
