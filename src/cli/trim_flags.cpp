#include "cli/trim_flags.h"

#include <cstdlib>
#include <string_view>

#include "cli/notice.h"

namespace sluice::cli {
namespace {

// The flag each environment key stands in for (for the notice line).
const char* flag_of(std::string_view key) {
  if (key == moe::kEnvTopK) return moe::kFlagTopK;
  if (key == moe::kEnvTopP) return moe::kFlagTopP;
  return moe::kFlagExpertBudget;
}

bool blank(std::string_view v) { return v.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::optional<moe::EnvSetting> read_trim_env(const char* key) {
  constexpr std::string_view kPrefix = "SLUICE_";
  const std::string bare = std::string(key).substr(std::string_view(key).rfind(kPrefix, 0) == 0 ? kPrefix.size() : 0);
  for (const std::string& name : {std::string(key), bare}) {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || blank(v)) continue;  // VAR= counts as unset
    notice("sluice: environment " + name + "=" + v + " in force (as " + flag_of(key) + " " + v +
           "; the flag wins when given)");
    return moe::EnvSetting{name, v};
  }
  return std::nullopt;
}

void finalize_trim_flags(const TrimFlags& flags, moe::TrimConfig& cfg) {
  moe::resolve_trim_config(cfg, flags.given(), read_trim_env);
}

}  // namespace sluice::cli
