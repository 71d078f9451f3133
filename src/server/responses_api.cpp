#include "server/responses_api.h"

#include "server/forced_tool.h"

namespace sluice::server {
namespace {

using nlohmann::json;

std::string content_text(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad_request("'" + where + "' must be a string or an array of content parts");
  std::string text;
  for (const json& p : c) {
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type != "input_text" && type != "output_text" && type != "text")
      bad_request("'" + where + "': content parts of type \"" + type +
          "\" are not supported (input_text, output_text are)");
    if (!p.contains("text") || !p["text"].is_string())
      bad_request("'" + where + "': a text part needs a string 'text'");
    text += p["text"].get<std::string>();
  }
  return text;
}

// Input items as chat messages, appended to `out`.
void add_items(const json& input, json& out) {
  if (input.is_string()) {
    out.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) bad_request("'input' must be a string or an array of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!it.is_object()) bad_request("'" + where + "' must be an object");
    const std::string type = it.value("type", it.contains("role") ? "message" : "");
    if (type == "message") {
      const std::string role = it.value("role", "");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        bad_request("'" + where + ".role' must be user, assistant, system or developer");
      out.push_back({{"role", role == "developer" ? "system" : role},
                     {"content", content_text(it.value("content", json("")), where + ".content")}});
    } else if (type == "function_call") {
      if (!it.contains("name") || !it["name"].is_string())
        bad_request("'" + where + "': a function_call needs a string 'name'");
      json call = {
          {"id", it.value("call_id", "")},
          {"type", "function"},
          {"function", {{"name", it["name"]}, {"arguments", it.value("arguments", "{}")}}}};
      // Consecutive calls belong to one assistant turn.
      if (!out.empty() && out.back()["role"] == "assistant" && out.back().contains("tool_calls")) {
        out.back()["tool_calls"].push_back(std::move(call));
      } else {
        out.push_back({{"role", "assistant"},
                       {"content", ""},
                       {"tool_calls", json::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      const json o = it.value("output", json(""));
      out.push_back({{"role", "tool"},
                     {"tool_call_id", it.value("call_id", "")},
                     {"content", o.is_string() ? o.get<std::string>() : o.dump()}});
    } else if (type == "reasoning") {
      // Earlier reasoning: templates drop it from history anyway.
    } else {
      bad_request("'" + where + "': items of type \"" + type +
          "\" are not supported (message, function_call, function_call_output, reasoning are)");
    }
  }
}

}  // namespace

void ResponseStore::put(const std::string& id, json messages) {
  std::lock_guard lk(mu_);
  lru_.emplace_front(id, std::move(messages));
  index_[id] = lru_.begin();
  while (lru_.size() > kCapacity) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

json ResponseStore::get(const std::string& id) {
  std::lock_guard lk(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return lru_.front().second;
}

ParsedResponsesRequest parse_responses_request(const json& body, const GenerationDefaults& d,
                                               ResponseStore& store) {
  if (!body.is_object()) bad_request("the request body must be a JSON object");
  ParsedResponsesRequest out;
  json conv = json::array();
  if (auto p = body.find("previous_response_id"); p != body.end() && !p->is_null()) {
    if (!p->is_string()) bad_request("'previous_response_id' must be a string");
    conv = store.get(p->get<std::string>());
    if (conv.is_null())
      bad_request("'previous_response_id': no stored response \"" + p->get<std::string>() +
          "\" (unknown, or dropped: the last " + std::to_string(ResponseStore::kCapacity) +
          " are kept, in memory)");
  }
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) bad_request("'input' is required");
  add_items(*in, conv);
  out.conversation = conv;
  json chat = json::object();
  json messages = json::array();
  if (auto s = body.find("instructions"); s != body.end() && !s->is_null()) {
    if (!s->is_string()) bad_request("'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", *s}});
  }
  for (const json& m : conv) messages.push_back(m);
  chat["messages"] = std::move(messages);
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) bad_request("'tools' must be an array");
    json tools = json::array();
    for (const json& tool : *t) {
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("name") ||
          !tool["name"].is_string())
        bad_request("'tools': only function tools ({\"type\": \"function\", \"name\", ...}) are supported");
      tools.push_back({{"type", "function"},
                       {"function",
                        {{"name", tool["name"]},
                         {"description", tool.value("description", "")},
                         {"parameters", tool.value("parameters", json({{"type", "object"}}))}}}});
    }
    chat["tools"] = std::move(tools);
  }
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    if (c->is_object() && c->value("type", "") == "function" && c->contains("name"))
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*c)["name"]}}}};
    else
      chat["tool_choice"] = *c;
  }
  if (auto f = body.find("text"); f != body.end() && f->is_object() && f->contains("format")) {
    const json& fmt = (*f)["format"];
    if (!fmt.is_object() || !fmt.contains("type"))
      bad_request("'text.format' must be an object with a 'type'");
    json rf = {{"type", fmt["type"]}};
    if (fmt["type"] == "json_schema")
      rf["json_schema"] = {{"name", fmt.value("name", "")},
                           {"schema", fmt.value("schema", json())}};
    chat["response_format"] = rf;
  }
  if (body.contains("max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
  for (const char* key : {"temperature", "top_p", "stream"})
    if (body.contains(key)) chat[key] = body[key];
  out.gen = parse_chat_request(chat, d);
  return out;
}

ResponsesBuilder::ResponsesBuilder(ResponsesInfo info)
    : info_(std::move(info)), parser_(info_.format, info_.starts_in_reasoning) {}

chat_output::ParsedOutput ResponsesBuilder::split(const std::string& text) const {
  if (!info_.forced_tool_call)
    return chat_output::parse_output(text, info_.format, info_.starts_in_reasoning);
  chat_output::ParsedOutput p;
  p.tool_calls = forced_call_tool_calls(text);
  return p;
}

json ResponsesBuilder::envelope(const std::string& status) const {
  return {{"id", info_.id},
          {"object", "response"},
          {"created_at", info_.created},
          {"status", status},
          {"model", info_.model},
          {"output", json::array()},
          {"previous_response_id", info_.previous_response_id},
          {"error", nullptr},
          {"incomplete_details", nullptr},
          {"usage", nullptr}};
}

namespace {
json reasoning_item(const std::string& id, const std::string& text) {
  return {{"type", "reasoning"},
          {"id", id},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}
json message_item(const std::string& id, const std::string& text, const std::string& status) {
  return {
      {"type", "message"},
      {"id", id},
      {"status", status},
      {"role", "assistant"},
      {"content",
       json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}};
}
json call_item(const json& call, int n) {
  return {{"type", "function_call"},
          {"id", "fc_" + std::to_string(n)},
          {"call_id", "call_" + std::to_string(n)},
          {"name", call["function"]["name"]},
          {"arguments", call["function"]["arguments"]},
          {"status", "completed"}};
}
json finish(json r, const GenerationResult& g, json output) {
  const bool cut = g.finish_reason == "length";
  r["status"] = cut ? "incomplete" : "completed";
  if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  r["output"] = std::move(output);
  r["usage"] = {{"input_tokens", g.prompt_tokens},
                {"input_tokens_details", {{"cached_tokens", g.cached_tokens}}},
                {"output_tokens", g.completion_tokens},
                {"output_tokens_details", {{"reasoning_tokens", 0}}},
                {"total_tokens", g.prompt_tokens + g.completion_tokens}};
  return r;
}
}  // namespace

json ResponsesBuilder::whole(const GenerationResult& g) const {
  const chat_output::ParsedOutput p = split(g.text);
  json output = json::array();
  if (!p.reasoning_content.empty()) output.push_back(reasoning_item("rs_0", p.reasoning_content));
  if (!p.content.empty() || p.tool_calls.empty())
    output.push_back(message_item("msg_0", p.content, "completed"));
  for (size_t i = 0; i < p.tool_calls.size(); ++i)
    output.push_back(call_item(p.tool_calls[i], static_cast<int>(i)));
  return finish(envelope("completed"), g, std::move(output));
}

json ResponsesBuilder::answer_message(const GenerationResult& g) const {
  const chat_output::ParsedOutput p = split(g.text);
  json m = {{"role", "assistant"}, {"content", p.content}};
  if (!p.tool_calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < p.tool_calls.size(); ++i) {
      json c = p.tool_calls[i];
      c["id"] = "call_" + std::to_string(i);
      calls.push_back(std::move(c));
    }
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

void ResponsesBuilder::event(std::vector<SseEvent>& out, const std::string& type, json fields) {
  fields["type"] = type;
  fields["sequence_number"] = seq_++;
  out.emplace_back(type, std::move(fields));
}

std::vector<SseEvent> ResponsesBuilder::stream_start() {
  std::vector<SseEvent> out;
  event(out, "response.created", {{"response", envelope("in_progress")}});
  event(out, "response.in_progress", {{"response", envelope("in_progress")}});
  return out;
}

void ResponsesBuilder::close_item(std::vector<SseEvent>& out) {
  if (open_kind_.empty()) return;
  const std::string id = (open_kind_ == "message" ? "msg_" : "rs_") + std::to_string(index_);
  json item;
  if (open_kind_ == "message") {
    const json part = {
        {"type", "output_text"}, {"text", open_text_}, {"annotations", json::array()}};
    event(out, "response.output_text.done",
          {{"item_id", id}, {"output_index", index_}, {"content_index", 0}, {"text", open_text_}});
    event(out, "response.content_part.done",
          {{"item_id", id}, {"output_index", index_}, {"content_index", 0}, {"part", part}});
    item = message_item(id, open_text_, "completed");
  } else {
    event(out, "response.reasoning_text.done",
          {{"item_id", id}, {"output_index", index_}, {"content_index", 0}, {"text", open_text_}});
    item = reasoning_item(id, open_text_);
  }
  event(out, "response.output_item.done", {{"output_index", index_}, {"item", item}});
  items_.push_back(std::move(item));
  open_kind_.clear();
  open_text_.clear();
}

void ResponsesBuilder::add(const chat_output::ParsedOutput& part, std::vector<SseEvent>& out) {
  auto text = [&](const std::string& kind, const std::string& delta) {
    if (open_kind_ != kind) {
      close_item(out);
      open_kind_ = kind;
      ++index_;
      const std::string id = (kind == "message" ? "msg_" : "rs_") + std::to_string(index_);
      if (kind == "message") {
        event(out, "response.output_item.added",
              {{"output_index", index_}, {"item", message_item(id, "", "in_progress")}});
        event(out, "response.content_part.added",
              {{"item_id", id},
               {"output_index", index_},
               {"content_index", 0},
               {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
      } else {
        event(out, "response.output_item.added",
              {{"output_index", index_}, {"item", reasoning_item(id, "")}});
      }
    }
    open_text_ += delta;
    const std::string id = (kind == "message" ? "msg_" : "rs_") + std::to_string(index_);
    event(out, kind == "message" ? "response.output_text.delta" : "response.reasoning_text.delta",
          {{"item_id", id}, {"output_index", index_}, {"content_index", 0}, {"delta", delta}});
  };
  if (!part.reasoning_content.empty()) text("reasoning", part.reasoning_content);
  if (!part.content.empty()) text("message", part.content);
  for (const json& call : part.tool_calls) {
    close_item(out);
    ++index_;
    json item = call_item(call, n_calls_++);
    const std::string id = item["id"];
    json added = item;
    added["arguments"] = "";
    added["status"] = "in_progress";
    event(out, "response.output_item.added", {{"output_index", index_}, {"item", added}});
    event(out, "response.function_call_arguments.delta",
          {{"item_id", id}, {"output_index", index_}, {"delta", item["arguments"]}});
    event(out, "response.function_call_arguments.done",
          {{"item_id", id}, {"output_index", index_}, {"arguments", item["arguments"]}});
    event(out, "response.output_item.done", {{"output_index", index_}, {"item", item}});
    items_.push_back(std::move(item));
  }
}

std::vector<SseEvent> ResponsesBuilder::stream_text(const std::string& text) {
  std::vector<SseEvent> out;
  if (info_.forced_tool_call) {
    forced_text_ += text;
  } else {
    add(parser_.push(text), out);
  }
  return out;
}

std::vector<SseEvent> ResponsesBuilder::stream_end(const GenerationResult& g) {
  std::vector<SseEvent> out;
  if (info_.forced_tool_call) {
    chat_output::ParsedOutput p;
    p.tool_calls = forced_call_tool_calls(forced_text_);
    add(p, out);
  } else {
    add(parser_.finish(), out);
  }
  close_item(out);
  const json r = finish(envelope("completed"), g, items_);
  event(out, r["status"] == "completed" ? "response.completed" : "response.incomplete",
        {{"response", r}});
  return out;
}

}  // namespace sluice::server
