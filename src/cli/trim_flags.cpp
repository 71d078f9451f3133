#include "cli/trim_flags.h"

#include <cstdlib>

namespace sluice::cli {

void finalize_trim_flags(const TrimFlags& flags, moe::TrimConfig& cfg) {
  moe::resolve_trim_config(cfg, flags.given(), [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (!v) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace sluice::cli
