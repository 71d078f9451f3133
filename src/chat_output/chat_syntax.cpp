#include "chat_output/chat_syntax.h"

#include <nlohmann/json.hpp>

#include "chat_output/gemma4_call.h"
#include "util/json_text.h"

namespace sluice::chat_output {
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

// Qwen3-Coder / Qwen3.5 XML: <function=NAME> then <parameter=KEY>\nVALUE\n</parameter>
// blocks, then </function>. The template writes objects and arrays as JSON and
// everything else through Jinja's `string` filter, so a value that parses as
// JSON is taken as that JSON (42 -> 42, [1] -> [1]), anything else as a string.
// Without the tool's schema a string parameter whose text is valid JSON (e.g.
// "42") is read as that JSON value; Python's True/False/None (how `string`
// prints booleans and None) become true/false/null.
std::optional<ToolCallText> read_qwen_xml(std::string_view body) {
  constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>", kParam = "<parameter=",
                             kParamEnd = "</parameter>";
  const size_t f = body.find(kFunction);
  if (f == std::string_view::npos || !trim(body.substr(0, f)).empty()) return std::nullopt;
  const size_t name_end = body.find('>', f);
  if (name_end == std::string_view::npos) return std::nullopt;
  std::string name = trim(body.substr(f + kFunction.size(), name_end - f - kFunction.size()));
  const size_t fend = body.find(kFunctionEnd, name_end);
  if (name.empty() || fend == std::string_view::npos || !trim(body.substr(fend + kFunctionEnd.size())).empty())
    return std::nullopt;
  nlohmann::json args = nlohmann::json::object();
  for (size_t at = name_end + 1;;) {
    const size_t p = body.find(kParam, at);
    if (p == std::string_view::npos || p > fend) {  // only whitespace may follow the last parameter
      if (!trim(body.substr(at, fend - at)).empty()) return std::nullopt;
      break;
    }
    if (!trim(body.substr(at, p - at)).empty()) return std::nullopt;  // text between parameters: not a call
    const size_t key_end = body.find('>', p);
    const size_t value_end = body.find(kParamEnd, p);
    if (key_end == std::string_view::npos || value_end == std::string_view::npos || key_end > value_end ||
        value_end > fend)
      return std::nullopt;
    const std::string key = trim(body.substr(p + kParam.size(), key_end - p - kParam.size()));
    if (key.empty()) return std::nullopt;
    std::string_view value = body.substr(key_end + 1, value_end - key_end - 1);
    if (value.starts_with('\n')) value.remove_prefix(1);  // the template's own line breaks
    if (value.ends_with('\n')) value.remove_suffix(1);
    if (value == "True" || value == "False" || value == "None") {
      args[key] = value == "None" ? nlohmann::json(nullptr) : nlohmann::json(value == "True");
    } else {
      const nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
      args[key] = parsed.is_discarded() ? nlohmann::json(std::string(value)) : parsed;
    }
    at = value_end + kParamEnd.size();
  }
  // A raw value is model bytes, not always UTF-8: invalid bytes become U+FFFD.
  return ToolCallText{std::move(name), json_text(args)};
}

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

const TaggedSyntax kThink{true, kThinkOpen, kThinkClose, "", "", "<tool_call>", "</tool_call>", read_hermes};
const TaggedSyntax kQwenXml{true, kThinkOpen, kThinkClose, "", "", "<tool_call>", "</tool_call>", read_qwen_xml};
const TaggedSyntax kGlm{true, kThinkOpen, kThinkClose, "", "", "<tool_call>", "</tool_call>", read_glm};
const TaggedSyntax kDeepSeek{true,
                             kThinkOpen,
                             kThinkClose,
                             "<｜tool▁calls▁begin｜>",
                             "<｜tool▁calls▁end｜>",
                             "<｜tool▁call▁begin｜>",
                             "<｜tool▁call▁end｜>",
                             read_deepseek};
// Gemma 4: <|channel>thought\n...<channel|> reasoning (the channel's name is
// part of the opening marker); calls <|tool_call>call:NAME{...}<tool_call|>.
const TaggedSyntax kGemma4{true, "<|channel>thought", "<channel|>", "", "", "<|tool_call>", "<tool_call|>",
                           read_gemma4_call};

}  // namespace

std::string json_arguments(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? trim(text) : j.dump();
}

const TaggedSyntax* tagged_syntax(OutputFormat format) {
  switch (format) {
    case OutputFormat::Think: return &kThink;
    case OutputFormat::QwenXml: return &kQwenXml;
    case OutputFormat::Glm: return &kGlm;
    case OutputFormat::DeepSeek: return &kDeepSeek;
    case OutputFormat::Gemma4: return &kGemma4;
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

}  // namespace sluice::chat_output
