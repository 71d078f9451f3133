#include "runtime/chat_output.h"

#include <string_view>

namespace sluice::runtime {
namespace {

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(a, b - a + 1));
}

nlohmann::json tool_call(size_t index, const std::string& name, const std::string& arguments) {
  return {{"id", "call_" + std::to_string(index)},
          {"type", "function"},
          {"function", {{"name", name}, {"arguments", arguments}}}};
}

// Arguments as the JSON text OpenAI puts in `arguments`: valid JSON is
// re-serialised compactly, anything else passed as it is.
std::string json_text(const std::string& s) {
  const nlohmann::json j = nlohmann::json::parse(s, nullptr, false);
  return j.is_discarded() ? trim(s) : j.dump();
}

// Takes a leading or embedded <think>...</think> into reasoning (a missing
// opening tag counts: templates often put <think> in the prompt).
std::string take_think(std::string text, ParsedOutput& out) {
  const size_t close = text.find("</think>");
  if (close == std::string::npos) return text;
  size_t open = text.rfind("<think>", close);
  const size_t start = open == std::string::npos ? 0 : open + 7;
  out.reasoning_content = trim(std::string_view(text).substr(start, close - start));
  const std::string before = open == std::string::npos ? "" : text.substr(0, open);
  return before + text.substr(close + 8);
}

// Every <tool_call>BODY</tool_call> goes to `parse(body)`; the rest is content.
template <class Parse>
std::string take_tagged_calls(const std::string& text, ParsedOutput& out, Parse parse) {
  std::string rest;
  size_t pos = 0;
  for (;;) {
    const size_t a = text.find("<tool_call>", pos);
    if (a == std::string::npos) break;
    const size_t b = text.find("</tool_call>", a);
    if (b == std::string::npos) break;
    if (!parse(text.substr(a + 11, b - a - 11))) {  // not a call after all: keep the text
      rest += text.substr(pos, b + 12 - pos);
    } else {
      rest += text.substr(pos, a - pos);
    }
    pos = b + 12;
  }
  return rest + text.substr(pos);
}

}  // namespace

OutputFormat output_format_for(const std::string& arch, const std::string& chat_template) {
  if (arch == "gpt-oss") return OutputFormat::Harmony;
  if (arch == "glm4moe") return OutputFormat::Glm;
  if (arch == "deepseek2") return OutputFormat::DeepSeek;
  if (chat_template.find("<think>") != std::string::npos || chat_template.find("<tool_call>") != std::string::npos)
    return OutputFormat::Think;
  return OutputFormat::Plain;
}

ParsedOutput parse_output(const std::string& text, OutputFormat format) {
  ParsedOutput out;
  switch (format) {
    case OutputFormat::Plain:
      out.content = text;
      return out;
    case OutputFormat::Think: {
      const std::string rest = take_think(text, out);
      out.content = trim(take_tagged_calls(rest, out, [&](const std::string& body) {
        const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
        const nlohmann::json args = j.value("arguments", nlohmann::json::object());
        out.tool_calls.push_back(tool_call(out.tool_calls.size(), j["name"], args.is_string() ? args.get<std::string>() : args.dump()));
        return true;
      }));
      return out;
    }
    case OutputFormat::Glm: {
      const std::string rest = take_think(text, out);
      out.content = trim(take_tagged_calls(rest, out, [&](const std::string& body) {
        const size_t first = body.find("<arg_key>");
        const std::string name = trim(body.substr(0, first));
        if (name.empty()) return false;
        nlohmann::json args = nlohmann::json::object();
        for (size_t k = first; k != std::string::npos; k = body.find("<arg_key>", k)) {
          const size_t ke = body.find("</arg_key>", k), v = body.find("<arg_value>", k), ve = body.find("</arg_value>", k);
          if (ke == std::string::npos || v == std::string::npos || ve == std::string::npos) return false;
          const std::string key = body.substr(k + 9, ke - k - 9), value = body.substr(v + 11, ve - v - 11);
          // Values are JSON where the template wrote JSON (non-strings), else raw strings.
          const nlohmann::json parsed = nlohmann::json::parse(value, nullptr, false);
          args[key] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
          k = ve + 12;
        }
        out.tool_calls.push_back(tool_call(out.tool_calls.size(), name, args.dump()));
        return true;
      }));
      return out;
    }
    case OutputFormat::DeepSeek: {
      std::string rest = take_think(text, out);
      constexpr std::string_view kBegin = "<｜tool▁calls▁begin｜>", kEnd = "<｜tool▁calls▁end｜>",
                                 kCall = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>",
                                 kCallEnd = "<｜tool▁call▁end｜>";
      const size_t a = rest.find(kBegin);
      if (a != std::string::npos) {
        const size_t z = rest.find(kEnd, a);
        const std::string calls = rest.substr(a + kBegin.size(), (z == std::string::npos ? rest.size() : z) - a - kBegin.size());
        for (size_t c = calls.find(kCall); c != std::string::npos; c = calls.find(kCall, c + 1)) {
          const size_t s = calls.find(kSep, c), e = calls.find(kCallEnd, c);
          if (s == std::string::npos || e == std::string::npos || s > e) break;
          const std::string name = trim(calls.substr(c + kCall.size(), s - c - kCall.size()));
          out.tool_calls.push_back(tool_call(out.tool_calls.size(), name, json_text(calls.substr(s + kSep.size(), e - s - kSep.size()))));
        }
        rest = rest.substr(0, a) + (z == std::string::npos ? "" : rest.substr(z + kEnd.size()));
      }
      out.content = trim(rest);
      return out;
    }
    case OutputFormat::Harmony: {
      // Messages: [<|start|>assistant][ to=RECIPIENT]<|channel|>NAME[ TYPE]<|message|>BODY(<|end|>|<|call|>|<|return|>|end)
      size_t pos = 0;
      bool any = false;
      while (true) {
        const size_t ch = text.find("<|channel|>", pos);
        if (ch == std::string::npos) break;
        const size_t msg = text.find("<|message|>", ch);
        if (msg == std::string::npos) break;
        // The header: from this message's <|start|> (or where the last one
        // ended) to <|channel|>, where "to=functions.NAME" may stand.
        const size_t start = text.rfind("<|start|>", ch);
        const size_t head = start == std::string::npos || start < pos ? pos : start;
        const std::string header_before = text.substr(head, ch - head);
        const std::string channel_header = text.substr(ch + 11, msg - ch - 11);
        size_t end = std::string::npos, end_len = 0;
        for (std::string_view stop : {"<|end|>", "<|call|>", "<|return|>", "<|start|>"}) {
          const size_t e = text.find(stop, msg + 11);
          if (e < end) end = e, end_len = stop == "<|start|>" ? 0 : stop.size();
        }
        const std::string body = text.substr(msg + 11, (end == std::string::npos ? text.size() : end) - msg - 11);
        const std::string channel = trim(channel_header.substr(0, channel_header.find(' ')));
        const std::string h = header_before + " " + channel_header;
        const size_t to = h.find("to=functions.");
        any = true;
        if (to != std::string::npos) {
          std::string name = h.substr(to + 13);
          name = name.substr(0, name.find_first_of(" <"));
          out.tool_calls.push_back(tool_call(out.tool_calls.size(), trim(name), json_text(body)));
        } else if (channel == "analysis") {
          out.reasoning_content += body;
        } else {
          out.content += body;
        }
        pos = end == std::string::npos ? text.size() : end + end_len;
      }
      if (!any) out.content = text;
      return out;
    }
  }
  return out;
}

}  // namespace sluice::runtime
