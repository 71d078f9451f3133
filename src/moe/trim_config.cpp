#include "moe/trim_config.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "util/error.h"

namespace sluice::moe {
namespace {

std::string_view trim_spaces(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// Shortest round-trip-ish text for a float in messages ("1.5", not "1.500000").
std::string show(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

// "TOPK=abc" — how an environment-sourced value is named in errors.
std::string env_where(const char* name, const std::string& value) { return std::string(name) + "=" + value; }

int parse_env_int(const char* name, const std::string& raw) {
  const std::string_view s = trim_spaces(raw);
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    fail(env_where(name, raw), "not an integer");
  return v;
}

float parse_env_float(const char* name, const std::string& raw) {
  const std::string s(trim_spaces(raw));
  if (s.empty()) fail(env_where(name, raw), "not a number");
  errno = 0;
  char* end = nullptr;
  const float v = std::strtof(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE) fail(env_where(name, raw), "not a number");
  return v;
}

void check_top_k(int v, const std::string& where) {
  if (v < 1) fail(where, "MoE top-k must be >= 1 (got " + std::to_string(v) + ")");
}
void check_top_p(float v, const std::string& where) {
  if (!(v > 0.0f && v <= 1.0f)) fail(where, "MoE top-p must be in (0, 1] (got " + show(v) + ")");
}
void check_budget(int v, const std::string& where) {
  if (v < 1) fail(where, "expert budget must be >= 1 (got " + std::to_string(v) + ")");
}
void check_drop_cold(float v) {
  if (!(v >= 0.0f && v <= 1.0f))
    fail(kFlagDropCold, "threshold must be in [0, 1] (got " + show(v) + ")");
}

std::optional<EnvSetting> env_value(const EnvLookup& env, const char* key) {
  if (!env) return std::nullopt;
  auto v = env(key);
  if (v && trim_spaces(v->value).empty()) return std::nullopt;  // VAR= means unset
  return v;
}

}  // namespace

void resolve_trim_config(TrimConfig& cfg, const TrimFlagsGiven& given, const EnvLookup& env) {
  if (given.top_k) {
    check_top_k(cfg.top_k, kFlagTopK);
  } else if (auto e = env_value(env, kEnvTopK)) {
    cfg.top_k = parse_env_int(e->name.c_str(), e->value);
    check_top_k(cfg.top_k, env_where(e->name.c_str(), e->value));
  }
  if (given.top_p) {
    check_top_p(cfg.top_p, kFlagTopP);
  } else if (auto e = env_value(env, kEnvTopP)) {
    cfg.top_p = parse_env_float(e->name.c_str(), e->value);
    check_top_p(cfg.top_p, env_where(e->name.c_str(), e->value));
  }
  if (given.expert_budget) {
    check_budget(cfg.expert_budget, kFlagExpertBudget);
  } else if (auto e = env_value(env, kEnvExpertBudget)) {
    cfg.expert_budget = parse_env_int(e->name.c_str(), e->value);
    check_budget(cfg.expert_budget, env_where(e->name.c_str(), e->value));
  }
  validate_trim_config(cfg);  // defaults and drop-cold
}

void validate_trim_config(const TrimConfig& cfg) {
  if (cfg.top_k != 0) check_top_k(cfg.top_k, kFlagTopK);
  check_top_p(cfg.top_p, kFlagTopP);
  if (cfg.expert_budget != 0) check_budget(cfg.expert_budget, kFlagExpertBudget);
  check_drop_cold(cfg.drop_cold);
}

int effective_top_k(const TrimConfig& cfg, int model_k, int n_expert) {
  const int k = cfg.top_k > 0 ? cfg.top_k : model_k;
  if (k < 1 || k > n_expert)
    fail(kFlagTopK, "top-k " + std::to_string(k) + " is outside 1.." + std::to_string(n_expert) +
                        " (the model's expert count)");
  return k;
}

}  // namespace sluice::moe
