#include "server/chat_response.h"

namespace sluice::server {

using nlohmann::json;

json chat_message(const runtime::ParsedOutput& answer) {
  json message = {{"role", "assistant"}, {"content", answer.content}};
  if (!answer.reasoning_content.empty()) message["reasoning_content"] = answer.reasoning_content;
  if (!answer.tool_calls.empty()) message["tool_calls"] = answer.tool_calls;
  return message;
}

std::string chat_finish_reason(const std::string& generation_reason, bool called_tools) {
  return called_tools ? "tool_calls" : generation_reason;
}

std::vector<json> ChatDeltaStream::deltas(const runtime::ParsedOutput& part) {
  std::vector<json> out;
  if (!part.reasoning_content.empty()) out.push_back({{"reasoning_content", part.reasoning_content}});
  if (!part.content.empty()) out.push_back({{"content", part.content}});
  for (json call : part.tool_calls) {
    // Streamed calls carry their position: clients assemble them by index.
    call["index"] = n_calls_++;
    out.push_back({{"tool_calls", json::array({std::move(call)})}});
  }
  return out;
}

}  // namespace sluice::server
