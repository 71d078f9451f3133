#include "server/response.h"

#include "server/forced_tool.h"
#include "server/logprobs_json.h"

namespace sluice::server {
namespace {

using nlohmann::json;

json usage(const GenerationResult& g) {
  return {{"prompt_tokens", g.prompt_tokens},
          {"completion_tokens", g.completion_tokens},
          {"total_tokens", g.prompt_tokens + g.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", g.cached_tokens}}}};
}

std::string finish_reason(const GenerationResult& g, bool called_tools) {
  return called_tools ? "tool_calls" : g.finish_reason;
}

json text_choice(const std::string& text, const json& finish) {
  return {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}};
}

json delta_choice(json delta, const json& finish) {
  return {{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", finish}};
}

}  // namespace

ResponseBuilder::ResponseBuilder(ResponseInfo info)
    : info_(std::move(info)), parser_(info_.format, info_.starts_in_reasoning) {}

json ResponseBuilder::whole(const GenerationResult& g) const {
  json choice;
  if (info_.chat) {
    // Reasoning and tool calls in the model's own output format become the
    // OpenAI fields; anything that does not parse stays content.
    chat_output::ParsedOutput p;
    if (info_.forced_tool_call) {
      p.tool_calls = forced_call_tool_calls(g.text);
    } else {
      p = chat_output::parse_output(g.text, info_.format, info_.starts_in_reasoning);
    }
    json message = {{"role", "assistant"}, {"content", p.content}};
    if (!p.reasoning_content.empty()) message["reasoning_content"] = p.reasoning_content;
    if (!p.tool_calls.empty()) message["tool_calls"] = p.tool_calls;
    choice = {{"index", 0},
              {"message", std::move(message)},
              {"logprobs", nullptr},
              {"finish_reason", finish_reason(g, !p.tool_calls.empty())}};
  } else {
    choice = text_choice(g.text, g.finish_reason);
  }
  if (info_.logprobs) choice["logprobs"] = logprobs_json(g.logprobs, 0);
  json body = {{"id", info_.id},
               {"object", info_.chat ? "chat.completion" : "text_completion"},
               {"created", info_.created},
               {"model", info_.model},
               {"choices", json::array({std::move(choice)})},
               {"usage", usage(g)}};
  if (!g.notice.empty()) body["notice"] = g.notice;
  return body;
}

json ResponseBuilder::chunk(json choice) const {
  return {{"id", info_.id},
          {"object", info_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", info_.created},
          {"model", info_.model},
          {"choices", json::array({std::move(choice)})}};
}

void ResponseBuilder::add_deltas(const chat_output::ParsedOutput& part, std::vector<json>& events) {
  if (!part.reasoning_content.empty())
    events.push_back(chunk(delta_choice({{"reasoning_content", part.reasoning_content}}, nullptr)));
  if (!part.content.empty()) events.push_back(chunk(delta_choice({{"content", part.content}}, nullptr)));
  for (json call : part.tool_calls) {
    call["index"] = n_calls_++;  // streamed calls carry their position: clients assemble them by index
    events.push_back(chunk(delta_choice({{"tool_calls", json::array({std::move(call)})}}, nullptr)));
  }
}

std::vector<json> ResponseBuilder::stream_start() const {
  if (!info_.chat) return {};
  return {chunk(delta_choice({{"role", "assistant"}, {"content", ""}}, nullptr))};
}

json ResponseBuilder::logprobs_json(std::span<const runtime::TokenLogprob> lps, size_t first_offset) const {
  return info_.chat ? chat_logprobs(lps, *info_.tok) : completion_logprobs(lps, *info_.tok, first_offset);
}

void ResponseBuilder::attach_logprobs(std::vector<json>& events) {
  if (!info_.logprobs || events.empty() || pending_lps_.empty()) return;
  events[0]["choices"][0]["logprobs"] = logprobs_json(pending_lps_, lp_offset_);
  for (const runtime::TokenLogprob& t : pending_lps_) lp_offset_ += info_.tok->token_to_piece(t.id, false).size();
  pending_lps_.clear();
}

std::vector<json> ResponseBuilder::stream_text(const std::string& text, std::span<const runtime::TokenLogprob> lps) {
  pending_lps_.insert(pending_lps_.end(), lps.begin(), lps.end());
  std::vector<json> events;
  if (!info_.chat) {
    events.push_back(chunk(text_choice(text, nullptr)));
  } else if (info_.forced_tool_call) {
    forced_text_ += text;
  } else {
    add_deltas(parser_.push(text), events);
  }
  attach_logprobs(events);
  return events;
}

std::vector<json> ResponseBuilder::stream_end(const GenerationResult& g) {
  std::vector<json> events;
  json last;
  if (info_.chat) {
    if (info_.forced_tool_call) {
      chat_output::ParsedOutput p;
      p.tool_calls = forced_call_tool_calls(forced_text_);
      add_deltas(p, events);
    } else {
      add_deltas(parser_.finish(), events);
    }
    last = chunk(delta_choice(json::object(), finish_reason(g, n_calls_ > 0)));
  } else {
    last = chunk(text_choice("", g.finish_reason));
  }
  last["usage"] = usage(g);
  if (!g.notice.empty()) last["notice"] = g.notice;
  events.push_back(std::move(last));
  attach_logprobs(events);
  return events;
}

}  // namespace sluice::server
