#include "server/forced_tool.h"

#include "server/request.h"
#include "util/error.h"

namespace sluice::server {

using nlohmann::json;

std::shared_ptr<const grammar::JsonSchema> forced_call_schema(const json& tools,
                                                              const std::string& only) {
  if (!tools.is_array() || tools.empty())
    throw RequestError("'tool_choice' forces a call, but 'tools' is empty or absent");
  json alternatives = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const json* fn = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (!fn || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      throw RequestError("'tools'[" + std::to_string(i) +
                         "] needs a 'function' with a string 'name'");
    const std::string name = (*fn)["name"];
    if (!only.empty() && name != only) continue;
    json params = fn->value("parameters", json({{"type", "object"}}));
    try {
      grammar::JsonSchema::compile(params);  // for a message naming this tool's field
    } catch (const Error& e) {
      throw RequestError("'tools'[" + std::to_string(i) + "].function.parameters: " + e.what());
    }
    // The tool's own $refs point into its parameters: give it its own root.
    alternatives.push_back({{"type", "object"},
                            {"properties",
                             {{"name", {{"const", name}}},
                              {"arguments", {{"$ref", "#/$defs/p" + std::to_string(i)}}}}},
                            {"required", {"name", "arguments"}},
                            {"additionalProperties", false}});
  }
  if (alternatives.empty())
    throw RequestError("'tool_choice' names the function \"" + only +
                       "\", which is not in 'tools'");
  json defs = json::object();
  for (size_t i = 0; i < tools.size(); ++i)
    defs["p" + std::to_string(i)] =
        tools[i]["function"].value("parameters", json({{"type", "object"}}));
  try {
    return grammar::JsonSchema::compile({{"anyOf", alternatives}, {"$defs", defs}});
  } catch (const Error& e) {
    // A parameters schema with its own "#/..." refs cannot be nested this way.
    throw RequestError("'tools': a forced call's parameters could not be combined: " +
                       std::string(e.what()));
  }
}

std::string forced_call_opener(chat_output::OutputFormat format) {
  return format == chat_output::OutputFormat::Think ? "<tool_call>\n" : "";
}

json forced_call_tool_calls(const std::string& text) {
  const json call = json::parse(text, nullptr, false);
  if (call.is_discarded() || !call.is_object() || !call.contains("name") ||
      !call.contains("arguments"))
    return json::array();
  return json::array(
      {{{"id", "call_0"},
        {"type", "function"},
        {"function", {{"name", call["name"]}, {"arguments", call["arguments"].dump()}}}}});
}

}  // namespace sluice::server
