#include "server/anthropic.h"

#include "server/forced_tool.h"

namespace sluice::server {
namespace {

using nlohmann::json;

// A content field (string or blocks) as text; tool_use / tool_result blocks
// are collected by the caller.
std::string block_text(const json& content, const std::string& where, json* tool_calls,
                       json* tool_results) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request("'" + where + "' must be a string or an array of content blocks");
  std::string text;
  for (const json& b : content) {
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
      bad_request("'" + where + "' blocks must be objects with a string 'type'");
    const std::string type = b["type"];
    if (type == "text") {
      if (!b.contains("text") || !b["text"].is_string())
        bad_request("'" + where + "': a text block needs a string 'text'");
      text += b["text"].get<std::string>();
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Earlier reasoning: templates drop it from history anyway.
    } else if (type == "tool_use" && tool_calls) {
      if (!b.contains("name") || !b["name"].is_string())
        bad_request("'" + where + "': a tool_use block needs a string 'name'");
      tool_calls->push_back(
          {{"id", b.value("id", "")},
           {"type", "function"},
           {"function",
            {{"name", b["name"]}, {"arguments", b.value("input", json::object()).dump()}}}});
    } else if (type == "tool_result" && tool_results) {
      const json c = b.value("content", json(""));
      tool_results->push_back(
          {{"role", "tool"},
           {"tool_call_id", b.value("tool_use_id", "")},
           {"content", block_text(c, where + ".tool_result.content", nullptr, nullptr)}});
    } else {
      bad_request("'" + where + "': content blocks of type \"" + type +
          "\" are not supported (text, tool_use, tool_result, thinking are)");
    }
  }
  return text;
}

std::string stop_reason(const GenerationResult& g, bool called, const MessagesInfo& info,
                        json& stop_sequence) {
  stop_sequence = nullptr;
  if (called) return "tool_use";
  if (g.finish_reason == "length") return "max_tokens";
  if (g.stopped_by_string) {
    if (!info.single_stop_sequence.empty()) stop_sequence = info.single_stop_sequence;
    return "stop_sequence";
  }
  return "end_turn";
}

json usage(const GenerationResult& g) {
  return {{"input_tokens", g.prompt_tokens},
          {"output_tokens", g.completion_tokens},
          {"cache_read_input_tokens", g.cached_tokens}};
}

json tool_use_block(const json& call) {
  json input = json::parse(call["function"]["arguments"].get<std::string>(), nullptr, false);
  if (input.is_discarded()) input = json::object();
  return {{"type", "tool_use"},
          {"id", "toolu_" + call["id"].get<std::string>()},
          {"name", call["function"]["name"]},
          {"input", input}};
}

chat_output::ParsedOutput split(const std::string& text, const MessagesInfo& info) {
  if (!info.forced_tool_call)
    return chat_output::parse_output(text, info.format, info.starts_in_reasoning);
  chat_output::ParsedOutput p;
  p.tool_calls = forced_call_tool_calls(text);
  return p;
}

}  // namespace

GenerationRequest parse_messages_request(const json& body, const GenerationDefaults& d) {
  if (!body.is_object()) bad_request("the request body must be a JSON object");
  if (!body.contains("max_tokens") || body["max_tokens"].is_null()) bad_request("'max_tokens' is required");
  json chat = json::object();
  json messages = json::array();
  if (auto s = body.find("system"); s != body.end() && !s->is_null())
    messages.push_back(
        {{"role", "system"}, {"content", block_text(*s, "system", nullptr, nullptr)}});
  auto m = body.find("messages");
  if (m == body.end() || !m->is_array() || m->empty()) bad_request("'messages' must be a non-empty array");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = "messages[" + std::to_string(i) + "].content";
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      bad_request("each message needs a string 'role'");
    const std::string role = msg["role"];
    if (role != "user" && role != "assistant")
      bad_request("'messages[" + std::to_string(i) + "].role' must be \"user\" or \"assistant\"");
    json calls = json::array(), results = json::array();
    const std::string text = block_text(msg.value("content", json("")), where, &calls, &results);
    for (json& r : results) messages.push_back(std::move(r));
    if (!text.empty() || !calls.empty() || results.empty()) {
      json out = {{"role", role}, {"content", text}};
      if (!calls.empty()) out["tool_calls"] = calls;
      messages.push_back(std::move(out));
    }
  }
  chat["messages"] = std::move(messages);
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) bad_request("'tools' must be an array");
    json tools = json::array();
    for (const json& tool : *t) {
      if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string())
        bad_request("each of 'tools' needs a string 'name'");
      tools.push_back({{"type", "function"},
                       {"function",
                        {{"name", tool["name"]},
                         {"description", tool.value("description", "")},
                         {"parameters", tool.value("input_schema", json({{"type", "object"}}))}}}});
    }
    chat["tools"] = std::move(tools);
  }
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    const std::string type = c->is_object() ? c->value("type", "") : "";
    if (type == "auto")
      chat["tool_choice"] = "auto";
    else if (type == "any")
      chat["tool_choice"] = "required";
    else if (type == "none")
      chat["tool_choice"] = "none";
    else if (type == "tool" && c->contains("name"))
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*c)["name"]}}}};
    else
      bad_request("'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", "
          "\"name\": ...}");
  }
  for (const char* key : {"max_tokens", "temperature", "top_p", "top_k", "stream"})
    if (body.contains(key)) chat[key] = body[key];
  if (auto s = body.find("stop_sequences"); s != body.end() && !s->is_null()) {
    if (!s->is_array()) bad_request("'stop_sequences' must be an array of strings");
    chat["stop"] = *s;
  }
  return parse_chat_request(chat, d);
}

MessagesBuilder::MessagesBuilder(MessagesInfo info)
    : info_(std::move(info)), parser_(info_.format, info_.starts_in_reasoning) {}

json MessagesBuilder::whole(const GenerationResult& g) const {
  const chat_output::ParsedOutput p = split(g.text, info_);
  json content = json::array();
  if (!p.reasoning_content.empty())
    content.push_back({{"type", "thinking"}, {"thinking", p.reasoning_content}, {"signature", ""}});
  if (!p.content.empty()) content.push_back({{"type", "text"}, {"text", p.content}});
  for (const json& call : p.tool_calls) content.push_back(tool_use_block(call));
  json stop_sequence;
  const std::string reason = stop_reason(g, !p.tool_calls.empty(), info_, stop_sequence);
  return {{"id", info_.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", info_.model},
          {"content", content},
          {"stop_reason", reason},
          {"stop_sequence", stop_sequence},
          {"usage", usage(g)}};
}

std::vector<SseEvent> MessagesBuilder::stream_start(int input_tokens) const {
  return {{"message_start",
           {{"type", "message_start"},
            {"message",
             {{"id", info_.id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", info_.model},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 0}}}}}}}};
}

void MessagesBuilder::open_block(const std::string& type, const json& block,
                                 std::vector<SseEvent>& events) {
  close_block(events);
  open_type_ = type;
  events.push_back(
      {"content_block_start",
       {{"type", "content_block_start"}, {"index", ++index_}, {"content_block", block}}});
}

void MessagesBuilder::close_block(std::vector<SseEvent>& events) {
  if (open_type_.empty()) return;
  events.push_back({"content_block_stop", {{"type", "content_block_stop"}, {"index", index_}}});
  open_type_.clear();
}

void MessagesBuilder::add(const chat_output::ParsedOutput& part, std::vector<SseEvent>& events) {
  auto delta = [&](const json& d) {
    events.push_back({"content_block_delta",
                      {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}}});
  };
  if (!part.reasoning_content.empty()) {
    if (open_type_ != "thinking")
      open_block("thinking", {{"type", "thinking"}, {"thinking", ""}}, events);
    delta({{"type", "thinking_delta"}, {"thinking", part.reasoning_content}});
  }
  if (!part.content.empty()) {
    if (open_type_ != "text") open_block("text", {{"type", "text"}, {"text", ""}}, events);
    delta({{"type", "text_delta"}, {"text", part.content}});
  }
  for (json call : part.tool_calls) {
    call["id"] = "call_" + std::to_string(n_calls_++);
    json block = tool_use_block(call);
    const std::string args = block["input"].dump();
    block["input"] = json::object();
    open_block("tool_use", block, events);
    delta({{"type", "input_json_delta"}, {"partial_json", args}});
    close_block(events);
  }
}

std::vector<SseEvent> MessagesBuilder::stream_text(const std::string& text) {
  std::vector<SseEvent> events;
  if (info_.forced_tool_call) {
    forced_text_ += text;
  } else {
    add(parser_.push(text), events);
  }
  return events;
}

std::vector<SseEvent> MessagesBuilder::stream_end(const GenerationResult& g) {
  std::vector<SseEvent> events;
  if (info_.forced_tool_call) {
    chat_output::ParsedOutput p;
    p.tool_calls = forced_call_tool_calls(forced_text_);
    add(p, events);
  } else {
    add(parser_.finish(), events);
  }
  close_block(events);
  json stop_sequence;
  const std::string reason = stop_reason(g, n_calls_ > 0, info_, stop_sequence);
  events.push_back({"message_delta",
                    {{"type", "message_delta"},
                     {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_sequence}}},
                     {"usage", {{"output_tokens", g.completion_tokens}}}}});
  events.push_back({"message_stop", {{"type", "message_stop"}}});
  return events;
}

}  // namespace sluice::server
