#include "server/response.h"

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
    const chat_output::ParsedOutput p = chat_output::parse_output(g.text, info_.format, info_.starts_in_reasoning);
    json message = {{"role", "assistant"}, {"content", p.content}};
    if (!p.reasoning_content.empty()) message["reasoning_content"] = p.reasoning_content;
    if (!p.tool_calls.empty()) message["tool_calls"] = p.tool_calls;
    choice = {{"index", 0}, {"message", std::move(message)}, {"finish_reason", finish_reason(g, !p.tool_calls.empty())}};
  } else {
    choice = text_choice(g.text, g.finish_reason);
  }
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

std::vector<json> ResponseBuilder::stream_text(const std::string& text) {
  if (!info_.chat) return {chunk(text_choice(text, nullptr))};
  std::vector<json> events;
  add_deltas(parser_.push(text), events);
  return events;
}

std::vector<json> ResponseBuilder::stream_end(const GenerationResult& g) {
  std::vector<json> events;
  json last;
  if (info_.chat) {
    add_deltas(parser_.finish(), events);
    last = chunk(delta_choice(json::object(), finish_reason(g, n_calls_ > 0)));
  } else {
    last = chunk(text_choice("", g.finish_reason));
  }
  last["usage"] = usage(g);
  if (!g.notice.empty()) last["notice"] = g.notice;
  events.push_back(std::move(last));
  return events;
}

}  // namespace sluice::server
