// Continuous batching for `sluice serve`: the model's sequence slots
// (ModelConfig::n_slots, --parallel) driven by one scheduler thread in steps.
// Each step evaluates every active request's next rows as ONE
// Model::eval_batch (a decoding request its last sampled token; a request
// whose prompt is still being read its next chunk of at most `prefill_chunk`
// tokens), so each MoE layer reads each needed expert once for the union of
// the step's routes; then samples each finished row with that request's own
// sampler, stop strings and JSON constraint. Requests join between steps
// and leave when done or cancelled; at most max_queue wait beyond the
// slots (submit() throws QueueFullError past that).
//
// A request's greedy output does not depend on what it is batched with
// (Model::eval_batch's invariant). An engine error during a step ends every
// request of that step with the error, and their slots start over empty.
//
// Thread-safety: submit(), wake() and metrics() from any thread; everything
// else runs on the scheduler thread, the model's only user.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/logprobs.h"
#include "runtime/session.h"
#include "server/request.h"
#include "server/slot_memory.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

struct GenerationResult {
  std::string text;           // the emitted text (stop strings cut off)
  std::string finish_reason;  // "stop" (end of generation, a stop string, a complete JSON object),
                              // "length", or "cancelled"
  int prompt_tokens = 0;
  int cached_tokens = 0;      // prompt tokens whose state was reused from a slot's cached tokens
  int completion_tokens = 0;  // tokens sampled
  // Why generation ended early in a way finish_reason cannot say ("" when
  // it did not): a JSON-constrained request that no token could continue.
  std::string notice;
  // r.logprobs >= 0: one entry per sampled token other than end-of-generation
  // (a token cut by a stop string included), in order.
  std::vector<runtime::TokenLogprob> logprobs;
  bool stopped_by_string = false;  // finish_reason "stop" because a stop string matched
};

// What a step hands the waiting thread: a token's log-probability (when the
// request asked for them) and the text it made safe to emit (may be empty).
struct Emitted {
  std::string text;
  std::optional<runtime::TokenLogprob> logprob;
};

// More requests than the slots and the queue hold: the server's 429.
class QueueFullError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One generation request: its input, and the mailbox between the HTTP thread
// that waits on it and the scheduler that runs it.
struct Job {
  GenerationRequest req;
  std::vector<int32_t> prompt;  // tokenized, checked by Engine::tokenize_prompt
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Emitted> chunks;      // emitted, not yet handed on (guarded by mu)
  bool done = false;                // guarded by mu; then result / error are final
  GenerationResult result;
  std::exception_ptr error;            // an engine error ended it
  std::atomic<bool> cancelled{false};  // the client went away (set by the waiting thread)
  // `n` > 1: the choices after the first name the first as their leader.
  // Once the leader's prompt is evaluated, a follower's slot starts from a
  // copy of the leader's state and its last prompt row of logits, so the
  // prompt is evaluated once for all choices (when the leader has moved on
  // before a follower gets a slot, the follower evaluates the prompt itself).
  std::shared_ptr<Job> leader;
  bool has_followers = false;
  // Scheduler thread only:
  bool prompt_done = false;  // has_followers: the prompt is evaluated, prompt_logits is its last row
  bool ended = false;        // released
  int slot = -1;             // the slot it runs (ran) in
  std::vector<float> prompt_logits;
};

// A request runs in the slot a slot action (save, restore) names: the server's 409.
class SlotBusyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One slot as GET /slots shows it.
struct SlotInfo {
  int id = 0;
  int n_past = 0;  // tokens its state holds
  bool busy = false;
};

// The scheduler's figures for /metrics.
struct SchedulerMetrics {
  uint64_t requests = 0;            // generations run (finished, cancelled or failed)
  uint64_t requests_failed = 0;     // ended by an engine error
  uint64_t requests_cancelled = 0;  // the client went away
  uint64_t requests_rejected = 0;   // 429: the queue was full
  uint64_t requests_rejected_memory = 0;  // 503: no memory for a slot's state (server/slot_memory.h)
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;
  uint64_t recomputed_tokens =
      0;  // reused prefixes a recurrent slot had to re-evaluate (its checkpoint lay earlier)
  uint64_t completion_tokens = 0;
  uint64_t queue_depth = 0;  // requests waiting for a slot now
  int slots = 0;
  int slots_busy = 0;
  uint64_t state_bytes = 0;       // slots' model state allocated now (running and cached for reuse)
  uint64_t state_busy_bytes = 0;  // of that, the slots running a request
  uint64_t state_budget = 0;      // what the slots' states may hold at once (--state-mb)
  model::BatchCounters batch;  // the model's eval_batch figures after the last step
  telemetry::RunSummary run;     // the session's summary as of the last finished request
};

class Scheduler {
 public:
  // Starts the scheduler thread over the slots of session.model().
  Scheduler(runtime::Session& session, const tokenizer::Tokenizer& tok, int max_queue,
            int prefill_chunk);
  // Stops the thread; requests still queued or running end with an error.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `job` (QueueFullError when max_queue requests already wait;
  // MemoryBudgetError when not even one slot's state fits the budget).
  void submit(std::shared_ptr<Job> job);
  // Queues every job of `jobs` (a request's choices), or none (QueueFullError).
  void submit_group(const std::vector<std::shared_ptr<Job>>& jobs);
  // Wakes the scheduler (a waiting thread set a job's `cancelled`).
  void wake();
  SchedulerMetrics metrics() const;

  // Runs fn(model, the tokens slot `slot` holds) on the scheduler thread
  // between steps, while the slot is free (the model's only user then), and
  // waits for it. fn keeps the tokens equal to what the slot's state holds.
  // RequestError for a slot id out of range, SlotBusyError when a request
  // runs in the slot; fn's exception propagates after the slot is emptied.
  void with_free_slot(int slot, const std::function<void(model::Model&, std::vector<int32_t>&)>& fn);
  std::vector<SlotInfo> slots_info();

 private:
  // Runs queued slot tasks (scheduler thread, mu_ not held).
  void run_tasks(std::deque<std::function<void()>> tasks);
  struct Slot;
  void loop();
  void admit();  // moves queued jobs into free slots (mu_ held)
  void start(int slot, std::shared_ptr<Job> job);
  void step();
  // Samples and emits the token after slot s's completed input.
  void next_token(int s);
  void finish(int s, const char* reason);
  void fail(int s, std::exception_ptr e);
  // Hands the job its end and frees the slot (counters under mu_).
  void release(int s);
  // Gives slot s a state within the budget: s's own when allocated, else a
  // new one, else the least recently used idle slot's (returned instead of s;
  // its cache gives way). -1 when none can be had (mu_ held; `why` gets a
  // failed allocation's reason).
  int slot_with_state(int s, std::string& why);
  // Allocated state bytes, and the running slots' share (scheduler thread).
  void count_state();  // into metrics_ (mu_ held)
  uint64_t state_in_use() const;

  runtime::Session& session_;
  model::Model& model_;
  const tokenizer::Tokenizer& tok_;
  const size_t max_queue_;
  const int prefill_chunk_;
  const int n_ctx_;
  const SlotMemory memory_;
  std::vector<std::unique_ptr<Slot>> slots_;  // scheduler thread only
  uint64_t admitted_ = 0;                     // requests admitted so far (Slot::last_used)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mu_
  std::deque<std::function<void()>> tasks_;  // guarded by mu_: with_free_slot / slots_info work
  bool stop_ = false;                       // guarded by mu_
  SchedulerMetrics metrics_;                // guarded by mu_
  std::thread thread_;                      // last: starts after everything above exists
};

}  // namespace sluice::server
