#include "server/request.h"

#include <cmath>
#include <limits>

#include "runtime/logprobs.h"
#include "server/errors.h"
#include "server/forced_tool.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::server {
namespace {

using nlohmann::json;

// A JSON number (integer or float) as float, finite.
float number_field(const json& v, const char* key) {
  if (!v.is_number()) bad_request(std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_request(std::string("'") + key + "' must be finite");
  return static_cast<float>(d);
}

// A JSON integer (a float with no fraction is accepted, as JS clients send 5.0).
int64_t integer_field(const json& v, const char* key) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      bad_request(std::string("'") + key + "' is out of range");
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  bad_request(std::string("'") + key + "' must be an integer");
}

// A request's schema compiled; a schema sluice cannot enforce is the client's 400.
std::shared_ptr<const grammar::JsonSchema> compile_schema(const json& schema, const std::string& field) {
  try {
    return grammar::JsonSchema::compile(schema);
  } catch (const Error& e) {
    bad_request("'" + field + "': " + e.what());
  }
}

// The fields completions and chat share.
void parse_common(const json& body, const GenerationDefaults& d, GenerationRequest& r) {
  r.max_tokens = d.max_tokens;
  r.sampler = d.sampler;
  r.random_seed = d.random_seed;
  for (const char* key : {"n_predict", "max_tokens", "max_completion_tokens"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    const int64_t n = integer_field(*it, key);
    if (n < -1 || n > std::numeric_limits<int>::max())
      bad_request(std::string("'") + key + "' must be -1 (until the context is full) or a count >= 0");
    r.max_tokens = static_cast<int>(n);
    r.max_tokens_field = key;
  }
  if (auto it = body.find("temperature"); it != body.end() && !it->is_null()) {
    r.sampler.temperature = number_field(*it, "temperature");
    if (r.sampler.temperature < 0) bad_request("'temperature' must be >= 0 (0 = greedy)");
  }
  if (auto it = body.find("top_p"); it != body.end() && !it->is_null()) {
    r.sampler.top_p = number_field(*it, "top_p");
    if (!(r.sampler.top_p > 0 && r.sampler.top_p <= 1)) bad_request("'top_p' must be in (0, 1]");
  }
  if (auto it = body.find("min_p"); it != body.end() && !it->is_null()) {
    r.sampler.min_p = number_field(*it, "min_p");
    if (!(r.sampler.min_p >= 0 && r.sampler.min_p <= 1)) bad_request("'min_p' must be in [0, 1]");
  }
  if (auto it = body.find("top_k"); it != body.end() && !it->is_null()) {
    const int64_t k = integer_field(*it, "top_k");
    if (k < 0 || k > std::numeric_limits<int>::max()) bad_request("'top_k' must be >= 0 (0 = off)");
    r.sampler.top_k = static_cast<int>(k);
  }
  if (auto it = body.find("repeat_penalty"); it != body.end() && !it->is_null()) {
    r.sampler.repeat_penalty = number_field(*it, "repeat_penalty");
    if (!(r.sampler.repeat_penalty > 0)) bad_request("'repeat_penalty' must be > 0 (1 = off)");
  }
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    const int64_t s = integer_field(*it, "seed");
    if (s < -1) bad_request("'seed' must be >= 0, or -1 for a random seed");
    r.random_seed = s == -1;
    if (s >= 0) r.sampler.seed = static_cast<uint64_t>(s);
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      r.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > kMaxStopStrings) bad_request("'stop' has more than " + std::to_string(kMaxStopStrings) + " strings");
      for (const json& s : *it) {
        if (!s.is_string()) bad_request("'stop' must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      bad_request("'stop' must be a string or an array of strings");
    }
    for (const std::string& s : r.stop) {
      if (s.empty()) bad_request("'stop' strings must not be empty");
      if (s.size() > kMaxStopStringBytes)
        bad_request("'stop' has a string of " + std::to_string(s.size()) + " bytes; the limit is " +
            std::to_string(kMaxStopStringBytes));
    }
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) bad_request("'stream' must be a boolean");
    r.stream = it->get<bool>();
  }
  if (auto it = body.find("n"); it != body.end() && !it->is_null()) {
    const int64_t n = integer_field(*it, "n");
    if (n < 1 || n > kMaxChoices)
      bad_request("'n' is " + std::to_string(n) + "; it must be 1.." + std::to_string(kMaxChoices));
    r.n = static_cast<int>(n);
  }
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    auto type = it->is_object() ? it->find("type") : it->end();
    if (!it->is_object() || type == it->end() || !type->is_string())
      bad_request("'response_format' must be an object with a string 'type' (\"text\", \"json_object\" or \"json_schema\")");
    const std::string t = type->get<std::string>();
    if (t == "json_object") {
      r.json_object = true;
    } else if (t == "json_schema") {
      r.json_object = true;  // without a schema: any one object
      auto js = it->find("json_schema");
      if (js != it->end() && !js->is_null()) {
        if (!js->is_object()) bad_request("'response_format.json_schema' must be an object with a 'schema'");
        if (auto sc = js->find("schema"); sc != js->end() && !sc->is_null()) r.json_schema = compile_schema(*sc, "response_format.json_schema.schema");
      }
    } else if (t != "text") {
      bad_request("'response_format': unknown type \"" + t + "\" (expected \"text\", \"json_object\" or \"json_schema\")");
    }
  }
}

// A top-logprobs count in 0..kMaxTopLogprobs.
int top_count(const json& v, const char* key) {
  const int64_t n = integer_field(v, key);
  if (n < 0 || n > runtime::kMaxTopLogprobs)
    bad_request(std::string("'") + key + "' must be 0.." + std::to_string(runtime::kMaxTopLogprobs));
  return static_cast<int>(n);
}

// Chat: logprobs (boolean) and top_logprobs (needs logprobs true, as OpenAI).
void parse_chat_logprobs(const json& body, GenerationRequest& r) {
  bool on = false;
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) bad_request("'logprobs' must be a boolean (chat; the count goes in 'top_logprobs')");
    on = it->get<bool>();
  }
  int top = 0;
  if (auto it = body.find("top_logprobs"); it != body.end() && !it->is_null()) {
    top = top_count(*it, "top_logprobs");
    if (!on) bad_request("'top_logprobs' needs 'logprobs': true");
  }
  r.logprobs = on ? top : -1;
}

// Completions: logprobs (a count; false/null: off) or llama-server's n_probs.
void parse_completion_logprobs(const json& body, GenerationRequest& r) {
  for (const char* key : {"logprobs", "n_probs"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (it->is_boolean()) {
      r.logprobs = it->get<bool>() ? 0 : -1;
      continue;
    }
    const int n = top_count(*it, key);
    // llama-server's n_probs 0 means none; OpenAI's logprobs 0 means the sampled token only.
    r.logprobs = (n == 0 && std::string(key) == "n_probs") ? -1 : n;
  }
}

void force_call(GenerationRequest& r, const std::string& name) {
  if (r.json_object || r.json_schema) bad_request("'tool_choice' that forces a call cannot be combined with 'response_format'");
  r.json_schema = forced_call_schema(r.tools, name);
  r.force_tool_call = true;
}

// tool_choice (see parse_chat_request's contract).
void parse_tool_choice(const json& body, GenerationRequest& r) {
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return;
  if (it->is_string()) {
    const std::string c = it->get<std::string>();
    if (c == "auto") return;
    if (c == "none") {
      r.tools = nullptr;
      return;
    }
    if (c == "required") {
      force_call(r, "");
      return;
    }
    bad_request("'tool_choice' must be \"auto\", \"none\" or \"required\" (got \"" + c + "\")");
  }
  if (it->is_object() && it->value("type", json()) == "function") {
    auto fn = it->find("function");
    if (fn == it->end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      bad_request("'tool_choice': {\"type\": \"function\"} needs 'function': {\"name\": ...}");
    force_call(r, (*fn)["name"].get<std::string>());
    return;
  }
  bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}");
}

void require_object(const json& body) {
  if (!body.is_object()) bad_request("the request body must be a JSON object");
}

}  // namespace

json parse_json_body(std::string_view text) {
  // depth: the containers open around the value being started (0 for the
  // body itself). Throwing ends the parse at once; nothing deeper is built.
  const json::parser_callback_t cap_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      bad_request("the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels of objects and arrays");
    return true;
  };
  json body = json::parse(text, cap_depth, false);
  if (body.is_discarded()) bad_request("the request body is not valid JSON");
  return body;
}

GenerationRequest parse_completion_request(const json& body, const GenerationDefaults& d) {
  require_object(body);
  GenerationRequest r;
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) bad_request("'prompt' is required");
  const json* p = &*it;
  // [ "text" ]: one prompt in a batch of one (OpenAI's batch form).
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
  } else if (p->is_array() && !p->empty()) {
    std::vector<int32_t> ids;
    ids.reserve(p->size());
    for (const json& v : *p) {
      if (!v.is_number_integer()) bad_request("'prompt' must be a string or an array of token ids (one prompt per request)");
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        bad_request("'prompt' has a token id out of range: " + std::to_string(v.get<uint64_t>()));
      const int64_t id = v.get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) bad_request("'prompt' has a token id out of range: " + std::to_string(id));
      ids.push_back(static_cast<int32_t>(id));
    }
    r.prompt_ids = std::move(ids);
  } else {
    bad_request("'prompt' must be a string or a non-empty array of token ids");
  }
  parse_common(body, d, r);
  parse_completion_logprobs(body, r);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const GenerationDefaults& d) {
  require_object(body);
  GenerationRequest r;
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) bad_request("'messages' must be a non-empty array");
  if (it->size() > kMaxMessages)
    bad_request("'messages' has " + std::to_string(it->size()) + " entries; the limit is " + std::to_string(kMaxMessages));
  for (const json& m : *it) {
    if (!m.is_object()) bad_request("'messages' entries must be objects");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad_request("each message needs a string 'role'");
    auto content = m.find("content");
    if (content != m.end() && !(content->is_string() || content->is_array() || content->is_null()))
      bad_request("a message's 'content' must be a string, an array of parts, or null");
  }
  r.messages = *it;
  if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
    if (!t->is_array()) bad_request("'tools' must be an array");
    if (t->size() > kMaxTools)
      bad_request("'tools' has " + std::to_string(t->size()) + " entries; the limit is " + std::to_string(kMaxTools));
    for (size_t i = 0; i < t->size(); ++i) {
      const size_t bytes = json_text((*t)[i]).size();
      if (bytes > kMaxToolJsonBytes)
        bad_request("'tools'[" + std::to_string(i) + "] is " + std::to_string(bytes) + " bytes of JSON; the limit is " +
            std::to_string(kMaxToolJsonBytes));
    }
    r.tools = *t;
  }
  parse_common(body, d, r);
  parse_tool_choice(body, r);
  parse_chat_logprobs(body, r);
  return r;
}

}  // namespace sluice::server
