// llama-server's own endpoints, for clients written against it:
//   POST /completion: the body of /v1/completions (prompt, n_predict, stream,
//     sampling fields); the answer in llama-server's field names: content,
//     stop, tokens_predicted, tokens_evaluated, tokens_cached, stopped_eos,
//     stopped_limit, stopped_word, stopping_word, truncated, model.
//     Streamed: one {"content", "stop": false} event per piece of text, then
//     the whole body above with "content": "" and "stop": true (no [DONE]).
//   GET /props: default_generation_settings (n_ctx and the sampling
//     defaults), total_slots (1: requests run one at a time), model_alias.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/engine.h"
#include "server/request.h"

namespace sluice::server {

nlohmann::json llama_completion_body(const GenerationResult& g, const std::string& model,
                                     const std::vector<std::string>& stop, bool streamed_end);
nlohmann::json llama_completion_chunk(const std::string& text);
nlohmann::json llama_props(const GenerationDefaults& d, int n_ctx, const std::string& model);

}  // namespace sluice::server
