#include "cli/habit_flags.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <map>
#include <string_view>

namespace sluice::cli {
namespace {

enum class Arity {
  kNone,       // a switch
  kOne,        // takes one value: `-ngl 99` or `--n-gpu-layers=99`
  kOnOffAuto,  // takes an optional on|off|auto (llama.cpp's -fa)
};

enum class Action {
  kMap,            // becomes `target value`
  kMapUnlessGiven, // becomes `target value` (with a notice) unless target was given, then ignored (notice)
  kIgnore,         // dropped, with one notice saying why it does nothing here
  kDrop,           // dropped silently: it is what this command does anyway
  kRefuse,         // usage error saying what to use instead
};

struct Habit {
  const char* spellings;  // comma separated
  const char* command;    // "": any command; else only this one (earlier rows win)
  Arity arity;
  Action action;
  const char* target;     // kMap*: sluice's flag spellings, comma separated; the first is emitted
  const char* value;      // kMap of a switch: the value it stands for
  const char* why;        // kIgnore / kMapUnlessGiven: why; kRefuse: what to use instead
};

constexpr Habit kHabits[] = {
    {"-ngl,--n-gpu-layers,--gpu-layers", "", Arity::kOne, Action::kIgnore, "", "",
     "sluice computes on the CPU and streams experts from disk; there are no layers to offload"},
    {"-fa,--flash-attn", "", Arity::kOnOffAuto, Action::kIgnore, "", "",
     "sluice has one CPU attention kernel; there is nothing to switch"},
    {"-mli,--multiline-input", "", Arity::kNone, Action::kIgnore, "", "",
     "`sluice chat` always continues a line that ends in \\"},
    {"-b,--batch-size", "", Arity::kOne, Action::kIgnore, "", "",
     "sluice evaluates the whole prompt in micro-batches and has no logical batch (-ub N sets the micro-batch)"},
    {"-cnv,--conversation", "chat", Arity::kNone, Action::kDrop, "", "", ""},
    {"-cnv,--conversation", "", Arity::kNone, Action::kRefuse, "", "",
     "for a conversation use `sluice chat -m MODEL`"},
    {"-no-cnv,--no-conversation", "chat", Arity::kNone, Action::kRefuse, "", "",
     "`sluice chat` is the conversation; for one prompt use `sluice run -m MODEL -p TEXT`"},
    {"-no-cnv,--no-conversation", "", Arity::kNone, Action::kIgnore, "", "",
     "only `sluice chat` converses; there is nothing to turn off"},
    {"-sys,--system-prompt", "chat", Arity::kOne, Action::kMap, "--system", "", ""},
    {"-sys,--system-prompt", "", Arity::kOne, Action::kRefuse, "", "",
     "a system prompt belongs to a conversation: use `sluice chat -m MODEL --system TEXT`"},
    {"-ctk,--cache-type-k", "", Arity::kOne, Action::kMap, "--kv-type", "", ""},
    {"-ctv,--cache-type-v", "", Arity::kOne, Action::kMap, "--kv-type", "", ""},
    {"-ub,--ubatch-size", "", Arity::kOne, Action::kMap, "--ubatch", "", ""},
    {"-tb,--threads-batch", "", Arity::kOne, Action::kMapUnlessGiven, "-t,--threads", "",
     "sluice uses one thread count (-t) for the prompt and generation alike"},
    {"--no-mmap", "", Arity::kNone, Action::kMap, "--dense-weights", "anon", ""},
    {"--mmap", "", Arity::kNone, Action::kMap, "--dense-weights", "mmap", ""},
};

bool listed(std::string_view list, std::string_view word) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == word) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

std::string first_of(std::string_view list) { return std::string(list.substr(0, list.find(','))); }

const Habit* find_habit(std::string_view command, std::string_view flag) {
  for (const Habit& h : kHabits)
    if ((*h.command == '\0' || command == h.command) && listed(h.spellings, flag)) return &h;
  return nullptr;
}

// A token that can be a value: not a flag, though a negative number is one.
bool value_like(const std::string& s) {
  return !s.empty() && (s[0] != '-' || (s.size() > 1 && (std::isdigit(static_cast<unsigned char>(s[1])) != 0)));
}

// Who set a sluice setting so far, and to what.
struct Setter {
  std::string who;  // "--kv-type" or "-ctk"
  std::string value;
};

class Rewriter {
 public:
  explicit Rewriter(const std::vector<std::string>& args) : in_(args) {}

  HabitRewrite run() {
    if (in_.empty() || in_[0].empty() || in_[0][0] == '-') return {in_, {}};
    command_ = in_[0];
    note_explicit_targets();
    out_.args.push_back(command_);
    for (size_t i = 1; i < in_.size(); ++i) {
      if (in_[i] == "--") {
        out_.args.insert(out_.args.end(), in_.begin() + static_cast<long>(i), in_.end());
        break;
      }
      i = rewrite_at(i);
    }
    return std::move(out_);
  }

 private:
  // The sluice flags the habits map to, as the user gave them, so that a habit
  // that repeats one is dropped and one that contradicts it is refused.
  void note_explicit_targets() {
    for (size_t i = 1; i < in_.size() && in_[i] != "--"; ++i) {
      const std::string& t = in_[i];
      for (const Habit& h : kHabits) {
        if (*h.target == '\0' || (*h.command != '\0' && command_ != h.command)) continue;
        const size_t eq = t.find('=');
        const std::string flag = t.substr(0, eq);
        if (!listed(h.target, flag)) continue;
        const std::string v = eq != std::string::npos ? t.substr(eq + 1) : i + 1 < in_.size() ? in_[i + 1] : "";
        set_.emplace(first_of(h.target), Setter{flag, v});
      }
    }
  }

  // Handles the token at i; returns the index of the last token it used.
  size_t rewrite_at(size_t i) {
    const std::string& t = in_[i];
    const size_t eq = t.rfind("--", 0) == 0 ? t.find('=') : std::string::npos;
    const std::string flag = t.substr(0, eq);
    const Habit* h = find_habit(command_, flag);
    if (h == nullptr || (eq != std::string::npos && h->arity != Arity::kOne)) {
      out_.args.push_back(t);
      return i;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = t.substr(eq + 1);
    } else if (h->arity == Arity::kOne) {
      if (i + 1 >= in_.size() || !value_like(in_[i + 1])) throw CLI::ValidationError(flag, "needs a value");
      value = in_[++i];
    } else if (h->arity == Arity::kOnOffAuto && i + 1 < in_.size() &&
               (in_[i + 1] == "on" || in_[i + 1] == "off" || in_[i + 1] == "auto")) {
      value = in_[++i];
    }
    apply(*h, flag, value);
    return i;
  }

  void apply(const Habit& h, const std::string& flag, const std::string& value) {
    const std::string shown = value.empty() ? flag : flag + " " + value;
    switch (h.action) {
      case Action::kDrop:
        return;
      case Action::kIgnore:
        out_.notices.push_back("sluice: " + shown + " ignored: " + h.why);
        return;
      case Action::kRefuse:
        throw CLI::ValidationError(flag, std::string("not a `sluice ") + command_ + "` flag: " + h.why);
      case Action::kMapUnlessGiven:
        if (set_.count(first_of(h.target)) != 0) {
          out_.notices.push_back("sluice: " + shown + " ignored: " + h.why);
          return;
        }
        out_.notices.push_back("sluice: " + shown + " read as " + first_of(h.target) + " " + value + ": " + h.why);
        break;
      case Action::kMap:
        break;
    }
    const std::string target = first_of(h.target);
    const std::string v = *h.value != '\0' ? std::string(h.value) : value;
    const auto [it, fresh] = set_.emplace(target, Setter{flag, v});
    if (!fresh) {
      if (it->second.value == v) return;  // said twice: once is enough
      throw CLI::ValidationError(shown, "contradicts " + it->second.who + " " + it->second.value + " (both set " +
                                            target + ")");
    }
    out_.args.push_back(target);
    out_.args.push_back(v);
  }

  const std::vector<std::string>& in_;
  std::string command_;
  std::map<std::string, Setter> set_;  // by the target's first spelling
  HabitRewrite out_;
};

}  // namespace

HabitRewrite rewrite_habit_flags(const std::vector<std::string>& args) { return Rewriter(args).run(); }

}  // namespace sluice::cli
