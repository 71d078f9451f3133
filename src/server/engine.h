// The model side of the server: one Session whose model holds N sequence
// slots, run by a Scheduler (continuous batching: requests join and leave
// between steps, each step one batched forward; a prompt reuses the free
// slot with the longest shared prefix), and the counters /metrics exposes.
//
// Thread-safety: every public method may be called from any HTTP thread.
// generate() blocks until its request is done; tokenize_prompt() and the
// tokenizer need no turn (the tokenizer is immutable).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "runtime/slot_file.h"
#include "telemetry/telemetry.h"
#include "server/chat_renderer.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

// Cumulative figures for /metrics (server/scheduler.h), plus the queue bound.
struct EngineMetrics : SchedulerMetrics {
  int max_queue = 0;
  bool busy = false;  // a generation is running now
};

class Engine {
 public:
  // max_queue: requests that may wait beyond the model's slots (more: 429).
  // prefill_chunk: prompt tokens a request evaluates per step, so a long
  // prompt shares steps with the others' decoding instead of stalling them.
  Engine(runtime::Session& session, ChatRenderer renderer, int max_queue = kDefaultMaxQueue,
         int prefill_chunk = kDefaultPrefillChunk);
  static constexpr int kDefaultMaxQueue = 64;
  static constexpr int kDefaultPrefillChunk = 512;

  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  int n_ctx() const { return n_ctx_; }
  bool has_chat_renderer() const { return static_cast<bool>(renderer_); }

  // The request's prompt as token ids: text is tokenized with the model's
  // special tokens (BOS), ids are range-checked, chat messages go through the
  // renderer. Throws RequestError when the prompt is empty, has a bad id, or
  // does not leave room for one token in the context, or when the request's
  // max_tokens exceeds the context. `rendered` (optional)
  // gets the chat prompt's text ("" for other prompts).
  std::vector<int32_t> tokenize_prompt(const GenerationRequest& r, std::string* rendered = nullptr) const;

  // Queues the request (QueueFullError when the queue is full); then
  // wait() hands its text on and returns its result. generate() is both.
  std::shared_ptr<Job> submit(const GenerationRequest& r, const std::vector<int32_t>& prompt);
  // r.n choices as one group (all queued or none): the first evaluates the
  // prompt, the others start from a copy of its state (Job::leader). Choice
  // i samples with seed + i (unless the seed is drawn per request).
  std::vector<std::shared_ptr<Job>> submit_choices(const GenerationRequest& r, const std::vector<int32_t>& prompt);
  int n_slots() const { return n_slots_; }
  // Wakes the scheduler (a waiting thread set a job's `cancelled`).
  void wake() { sched_.wake(); }
  // every_token: on_text also gets "" for a token that has a log-probability
  // but added no text (held back, or a control token), so a stream can send
  // one event per token (time to first token, inter-token latency).
  GenerationResult wait(const std::shared_ptr<Job>& job, const std::function<bool(const std::string&)>& on_text,
                        const std::function<void(const runtime::TokenLogprob&)>& on_logprob = {},
                        bool every_token = false);

  // Waits for a slot, then generates (batched with the other requests). on_text gets each chunk of emitted
  // text (see TextStream) and returns false when the client is gone, which
  // stops generation (finish_reason "cancelled"). Engine errors propagate
  // after the request's slot is reset (its state is then unknown).
  //
  // r.json_object: every token must keep the text a prefix of one JSON
  // object (grammar/json_prefix.h); special and control tokens never
  // qualify, end-of-generation only once the object is complete, and
  // generation stops ("stop") as soon as it is. When no token can continue
  // the object, generation ends there: finish_reason "stop" and a notice.
  // Stop strings still cut the text where they match.
  //
  // r.json_schema (response_format json_schema, a forced tool call): the
  // same, with "a prefix of a document the schema accepts"
  // (grammar/json_schema_prefix.h) for "a prefix of one JSON object".
  //
  // r.logprobs >= 0: each token's log-probability (runtime/logprobs.h) goes
  // to on_logprob (optional) before the text it adds reaches on_text, and
  // into the result.
  GenerationResult generate(const GenerationRequest& r, const std::vector<int32_t>& prompt,
                            const std::function<bool(const std::string&)>& on_text,
                            const std::function<void(const runtime::TokenLogprob&)>& on_logprob = {});

  EngineMetrics metrics() const;

  // Slot files (runtime/slot_file.h), run between scheduler steps while the
  // slot is free (SlotBusyError otherwise; RequestError for a bad id).
  // save_slot returns the tokens saved and the file's bytes; restore_slot
  // the tokens restored (SlotFileError for a bad file: the slot is then empty).
  struct SlotFileResult {
    int tokens = 0;
    uint64_t bytes = 0;
  };
  SlotFileResult save_slot(int slot, const std::string& path);
  SlotFileResult restore_slot(int slot, const std::string& path);
  std::vector<SlotInfo> slots() { return sched_.slots_info(); }

 private:
  runtime::SlotIdentity identity_;
  std::vector<std::string> model_files_;  // never overwritten by a slot save
  tokenizer::Tokenizer tok_;
  ChatRenderer renderer_;
  int n_ctx_;
  int max_queue_;
  int n_slots_;
  Scheduler sched_;  // last: its thread uses the members above
};

}  // namespace sluice::server
