// The model side of the server: one Session, requests run one at a time in
// arrival order (WorkQueue), the KV prefix shared with the previous request
// reused, and the counters /metrics exposes.
//
// Thread-safety: every public method may be called from any HTTP thread.
// generate() blocks until its turn; tokenize_prompt() and the tokenizer need
// no turn (the tokenizer is immutable).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/logprobs.h"
#include "runtime/session.h"
#include "runtime/telemetry.h"
#include "server/chat_renderer.h"
#include "server/request.h"
#include "server/work_queue.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

struct GenerationResult {
  std::string text;            // the emitted text (stop strings cut off)
  std::string finish_reason;   // "stop" (end of generation, a stop string, a complete JSON object), "length", or "cancelled"
  int prompt_tokens = 0;
  int cached_tokens = 0;       // prompt tokens whose KV rows were reused from the previous request
  int completion_tokens = 0;   // tokens sampled
  // Why generation ended early in a way finish_reason cannot say ("" when
  // it did not): a JSON-constrained request that no token could continue.
  std::string notice;
  // r.logprobs >= 0: one entry per sampled token other than end-of-generation
  // (a token cut by a stop string included), in order.
  std::vector<runtime::TokenLogprob> logprobs;
  bool stopped_by_string = false;  // finish_reason "stop" because a stop string matched
};

// Cumulative figures for /metrics. `run` is the session's summary as of the
// last finished request (all requests so far).
struct EngineMetrics {
  uint64_t requests = 0;           // generations run (finished, cancelled or failed)
  uint64_t requests_failed = 0;    // ended by an engine error
  uint64_t requests_cancelled = 0; // the client went away
  uint64_t prompt_tokens = 0;
  uint64_t cached_prompt_tokens = 0;
  uint64_t completion_tokens = 0;
  uint64_t queue_depth = 0;        // requests waiting for their turn now
  bool busy = false;               // a generation is running now
  runtime::RunSummary run;
};

class Engine {
 public:
  Engine(runtime::Session& session, ChatRenderer renderer);

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

  // Waits for its turn, then generates. on_text gets each chunk of emitted
  // text (see TextStream) and returns false when the client is gone, which
  // stops generation (finish_reason "cancelled"). Engine errors propagate
  // after the session is reset (the KV state is then unknown).
  //
  // r.json_object: every token must keep the text a prefix of one JSON
  // object (runtime/json_prefix.h); special and control tokens never
  // qualify, end-of-generation only once the object is complete, and
  // generation stops ("stop") as soon as it is. When no token can continue
  // the object, generation ends there: finish_reason "stop" and a notice.
  // Stop strings still cut the text where they match.
  //
  // r.json_schema (response_format json_schema, a forced tool call): the
  // same, with "a prefix of a document the schema accepts"
  // (runtime/json_schema_prefix.h) for "a prefix of one JSON object".
  //
  // r.logprobs >= 0: each token's log-probability (runtime/logprobs.h) goes
  // to on_logprob (optional) before the text it adds reaches on_text, and
  // into the result. Tokens are then sampled one by one (no MTP drafts).
  GenerationResult generate(const GenerationRequest& r, const std::vector<int32_t>& prompt,
                            const std::function<bool(const std::string&)>& on_text,
                            const std::function<void(const runtime::TokenLogprob&)>& on_logprob = {});

  EngineMetrics metrics() const;

 private:
  runtime::Session& session_;
  tokenizer::Tokenizer tok_;
  ChatRenderer renderer_;
  int n_ctx_;
  WorkQueue queue_;
  std::atomic<bool> busy_{false};
  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;  // guarded by metrics_mu_ (queue_depth/busy filled on read)
};

}  // namespace sluice::server
