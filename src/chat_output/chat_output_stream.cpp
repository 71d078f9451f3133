#include "chat_output/chat_output_stream.h"

#include <algorithm>
#include <vector>

#include "chat_output/chat_syntax.h"

namespace sluice::chat_output {
namespace {

constexpr std::string_view kSpace = " \t\r\n";

// The longest suffix of s that is a proper prefix of one of `markers`.
size_t marker_prefix_tail(std::string_view s, const std::vector<std::string_view>& markers) {
  size_t hold = 0;
  for (std::string_view m : markers)
    for (size_t k = std::min(m.size() - 1, s.size()); k > hold; --k)
      if (s.substr(s.size() - k) == m.substr(0, k)) {
        hold = k;
        break;
      }
  return hold;
}

}  // namespace

void ParsedOutput::append(const ParsedOutput& more) {
  content += more.content;
  reasoning_content += more.reasoning_content;
  for (const auto& c : more.tool_calls) tool_calls.push_back(c);
}

void OutputParser::Channel::add(std::string_view s, bool trim, std::string& out) {
  if (!trim) {
    out += s;
    return;
  }
  if (!started) {
    const size_t a = s.find_first_not_of(kSpace);
    if (a == std::string_view::npos) return;
    s.remove_prefix(a);
    started = true;
  }
  const size_t b = s.find_last_not_of(kSpace);
  if (b == std::string_view::npos) {
    held += s;
    return;
  }
  out += held;
  out += s.substr(0, b + 1);
  held.assign(s.substr(b + 1));
}

OutputParser::OutputParser(OutputFormat format, bool starts_in_reasoning)
    : tagged_(tagged_syntax(format)) {
  if (tagged_) {
    const bool think = starts_in_reasoning && !tagged_->think_open.empty();
    mode_ = think ? Mode::Reasoning : Mode::Content;
    thought_ = think;
  } else {
    mode_ = format == OutputFormat::Harmony ? Mode::HarmonyStart : Mode::Raw;
  }
}

void OutputParser::add_call(std::string name, std::string arguments, ParsedOutput& out) {
  out.tool_calls.push_back({{"id", "call_" + std::to_string(n_calls_++)},
                            {"type", "function"},
                            {"function", {{"name", std::move(name)}, {"arguments", std::move(arguments)}}}});
}

void OutputParser::take_text(std::string_view text, ParsedOutput& out) {
  if (text.empty()) return;
  const bool trim = tagged_ && tagged_->trim;
  switch (mode_) {
    case Mode::Raw:
    case Mode::HarmonyStart:
    case Mode::Content: content_.add(text, trim, out.content); return;
    case Mode::Reasoning: reasoning_.add(text, trim, out.reasoning_content); return;
    case Mode::Section: return;  // between calls: nothing the client sees
    case Mode::Call:
    case Mode::HarmonyHeader: body_ += text; return;
    case Mode::HarmonyBody:
      if (!call_name_.empty()) body_ += text;
      else if (channel_ == "analysis") reasoning_.add(text, false, out.reasoning_content);
      else content_.add(text, false, out.content);
      return;
  }
}

void OutputParser::take_marker(std::string_view m, ParsedOutput& out) {
  switch (mode_) {
    case Mode::Content:
      if (m == tagged_->think_open) {
        mode_ = Mode::Reasoning;
        thought_ = true;
      } else if (m == tagged_->section_begin) {
        mode_ = Mode::Section;
      } else {  // call_open
        mode_ = Mode::Call;
        body_.clear();
      }
      return;
    case Mode::Reasoning:
      if (m == tagged_->think_open) {
        // The prompt opened the block and the model opened it again: the
        // tag is dropped; after reasoning text it is text.
        if (reasoning_.started) take_text(m, out);
        return;
      }
      mode_ = Mode::Content;  // think_close
      return;
    case Mode::Section:
      if (m == tagged_->section_end) {
        mode_ = Mode::Content;
      } else {  // call_open
        mode_ = Mode::Call;
        body_.clear();
      }
      return;
    case Mode::Call: {  // call_close
      const bool in_section = !tagged_->section_begin.empty();
      mode_ = in_section ? Mode::Section : Mode::Content;
      if (auto call = tagged_->read_call(body_)) {
        add_call(std::move(call->name), std::move(call->arguments), out);
      } else if (!in_section) {  // not a call after all: the text stays
        take_text(std::string(tagged_->call_open) + body_ + std::string(tagged_->call_close), out);
      }
      body_.clear();
      return;
    }
    case Mode::HarmonyHeader: {  // <|message|>
      const harmony::Header h = harmony::read_header(body_);
      channel_ = h.channel;
      call_name_ = h.function;
      body_.clear();
      mode_ = Mode::HarmonyBody;
      return;
    }
    case Mode::HarmonyBody:  // the message ends
      if (!call_name_.empty()) add_call(std::move(call_name_), json_arguments(body_), out);
      call_name_.clear();
      body_.clear();
      mode_ = Mode::HarmonyHeader;
      return;
    case Mode::Raw:
    case Mode::HarmonyStart: return;  // no markers
  }
}

void OutputParser::run(ParsedOutput& out, bool at_end) {
  for (;;) {
    if (mode_ == Mode::HarmonyStart) {
      // Harmony if the answer starts like a header, else plain text; wait
      // while it could still be either.
      if (pending_.empty()) return;
      bool header = false, maybe = false;
      for (std::string_view s : harmony::kHeaderStarts) {
        header |= pending_.starts_with(s);
        maybe |= s.starts_with(pending_);
      }
      if (!header && maybe && !at_end) return;
      mode_ = header ? Mode::HarmonyHeader : Mode::Raw;
    }
    std::vector<std::string_view> markers;
    auto add = [&](std::string_view m) {
      if (!m.empty()) markers.push_back(m);
    };
    switch (mode_) {
      case Mode::Raw:
      case Mode::HarmonyStart: break;
      case Mode::Content:
        if (!thought_) add(tagged_->think_open);
        add(tagged_->section_begin.empty() ? tagged_->call_open : tagged_->section_begin);
        break;
      case Mode::Reasoning:
        add(tagged_->think_close);
        add(tagged_->think_open);
        break;
      case Mode::Section:
        add(tagged_->call_open);
        add(tagged_->section_end);
        break;
      case Mode::Call: add(tagged_->call_close); break;
      case Mode::HarmonyHeader: add(harmony::kMessage); break;
      case Mode::HarmonyBody:
        for (std::string_view m : harmony::kBodyEnds) add(m);
        break;
    }
    // The earliest complete marker (none contains another: chat_syntax.h).
    size_t at = std::string::npos;
    std::string_view found;
    for (std::string_view m : markers) {
      const size_t p = pending_.find(m);
      if (p < at) at = p, found = m;
    }
    if (at == std::string::npos) {
      const size_t keep = at_end ? 0 : marker_prefix_tail(pending_, markers);
      take_text(std::string_view(pending_).substr(0, pending_.size() - keep), out);
      pending_.erase(0, pending_.size() - keep);
      return;
    }
    take_text(std::string_view(pending_).substr(0, at), out);
    const std::string marker(found);  // `found` points into pending_
    pending_.erase(0, at + marker.size());
    take_marker(marker, out);
  }
}

ParsedOutput OutputParser::push(std::string_view text) {
  ParsedOutput out;
  pending_ += text;
  run(out, false);
  return out;
}

ParsedOutput OutputParser::finish() {
  ParsedOutput out;
  run(out, true);
  // What an unfinished part leaves: an open call is text (Hermes, GLM) or
  // dropped (inside a DeepSeek section); an open harmony call is complete.
  if (mode_ == Mode::Call && tagged_->section_begin.empty()) {
    mode_ = Mode::Content;
    take_text(std::string(tagged_->call_open) + body_, out);
  }
  if (mode_ == Mode::HarmonyBody && !call_name_.empty()) add_call(std::move(call_name_), json_arguments(body_), out);
  return out;
}

}  // namespace sluice::chat_output
