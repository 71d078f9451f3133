#include "runtime/chat_syntax.h"

#include <nlohmann/json.hpp>

#include "util/json_text.h"

namespace sluice::runtime {
namespace {

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(a, b - a + 1));
}

// Hermes: {"name": NAME, "arguments": {...}} (arguments may be a JSON string).
std::optional<ToolCallText> read_hermes(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const nlohmann::json args = j.value("arguments", nlohmann::json::object());
  return ToolCallText{j["name"].get<std::string>(), args.is_string() ? args.get<std::string>() : args.dump()};
}

// GLM: NAME then <arg_key>K</arg_key><arg_value>V</arg_value> pairs; values
// are JSON where the template wrote JSON (non-strings), else raw strings.
std::optional<ToolCallText> read_glm(std::string_view body) {
  constexpr std::string_view kKey = "<arg_key>", kKeyEnd = "</arg_key>", kValue = "<arg_value>",
                             kValueEnd = "</arg_value>";
  const size_t first = body.find(kKey);
  std::string name = trim(body.substr(0, first));
  if (name.empty()) return std::nullopt;
  nlohmann::json args = nlohmann::json::object();
  for (size_t k = first; k != std::string_view::npos; k = body.find(kKey, k)) {
    const size_t ke = body.find(kKeyEnd, k), v = body.find(kValue, k), ve = body.find(kValueEnd, k);
    if (ke == std::string_view::npos || v == std::string_view::npos || ve == std::string_view::npos) return std::nullopt;
    const std::string key(body.substr(k + kKey.size(), ke - k - kKey.size()));
    const std::string value(body.substr(v + kValue.size(), ve - v - kValue.size()));
    const nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
    args[key] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
    k = ve + kValueEnd.size();
  }
  // A raw value is model bytes, not always UTF-8 (a token may end inside a
  // character): invalid bytes become U+FFFD rather than a throw from dump().
  return ToolCallText{std::move(name), json_text(args)};
}

// DeepSeek V3.1: NAME<｜tool▁sep｜>ARGS.
std::optional<ToolCallText> read_deepseek(std::string_view body) {
  constexpr std::string_view kSep = "<｜tool▁sep｜>";
  const size_t s = body.find(kSep);
  if (s == std::string_view::npos) return std::nullopt;
  std::string name = trim(body.substr(0, s));
  if (name.empty()) return std::nullopt;
  return ToolCallText{std::move(name), json_arguments(body.substr(s + kSep.size()))};
}

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

const TaggedSyntax kThink{true, kThinkOpen, kThinkClose, "", "", "<tool_call>", "</tool_call>", read_hermes};
const TaggedSyntax kGlm{true, kThinkOpen, kThinkClose, "", "", "<tool_call>", "</tool_call>", read_glm};
const TaggedSyntax kDeepSeek{true,
                             kThinkOpen,
                             kThinkClose,
                             "<｜tool▁calls▁begin｜>",
                             "<｜tool▁calls▁end｜>",
                             "<｜tool▁call▁begin｜>",
                             "<｜tool▁call▁end｜>",
                             read_deepseek};

}  // namespace

std::string json_arguments(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? trim(text) : j.dump();
}

const TaggedSyntax* tagged_syntax(OutputFormat format) {
  switch (format) {
    case OutputFormat::Think: return &kThink;
    case OutputFormat::Glm: return &kGlm;
    case OutputFormat::DeepSeek: return &kDeepSeek;
    case OutputFormat::Plain:
    case OutputFormat::Harmony: return nullptr;
  }
  return nullptr;
}

harmony::Header harmony::read_header(std::string_view header) {
  Header h;
  const size_t ch = header.find(kChannel);
  if (ch != std::string_view::npos) {
    const std::string rest = trim(header.substr(ch + kChannel.size()));
    h.channel = rest.substr(0, rest.find_first_of(" <"));
  }
  constexpr std::string_view kFunctions = "to=functions.";
  const size_t to = header.find(kFunctions);
  if (to != std::string_view::npos) {
    const std::string_view name = header.substr(to + kFunctions.size());
    h.function = trim(name.substr(0, name.find_first_of(" <")));
  }
  return h;
}

}  // namespace sluice::runtime
