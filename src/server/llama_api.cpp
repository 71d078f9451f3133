#include "server/llama_api.h"

namespace sluice::server {

using nlohmann::json;

json llama_completion_body(const GenerationResult& g, const std::string& model,
                           const std::vector<std::string>& stop, bool streamed_end) {
  // Which stop string matched is not recorded: with exactly one it is that one.
  const std::string word = g.stopped_by_string && stop.size() == 1 ? stop[0] : "";
  return {{"content", streamed_end ? std::string() : g.text},
          {"stop", true},
          {"model", model},
          {"tokens_predicted", g.completion_tokens},
          {"tokens_evaluated", g.prompt_tokens},
          {"tokens_cached", g.cached_tokens},
          {"stopped_eos", g.finish_reason == "stop" && !g.stopped_by_string},
          {"stopped_limit", g.finish_reason == "length"},
          {"stopped_word", g.stopped_by_string},
          {"stopping_word", word},
          {"truncated", false}};
}

json llama_completion_chunk(const std::string& text) {
  return {{"content", text}, {"stop", false}};
}

json llama_props(const GenerationDefaults& d, int n_ctx, const std::string& model) {
  return {{"default_generation_settings",
           {{"n_ctx", n_ctx},
            {"params",
             {{"n_predict", d.max_tokens},
              {"temperature", d.sampler.temperature},
              {"top_k", d.sampler.top_k},
              {"top_p", d.sampler.top_p},
              {"min_p", d.sampler.min_p},
              {"repeat_penalty", d.sampler.repeat_penalty},
              {"repeat_last_n", d.sampler.repeat_last_n},
              {"seed", d.random_seed ? -1 : static_cast<int64_t>(d.sampler.seed)}}}}},
          {"total_slots", 1},
          {"model_alias", model}};
}

}  // namespace sluice::server
