#include "cli/notice.h"

#include <atomic>
#include <cstdio>

namespace sluice::cli {
namespace {
// Atomic: engine threads may log through notice() (ModelConfig::log).
std::atomic<bool> g_quiet{false};
}  // namespace

void set_quiet(bool quiet) { g_quiet.store(quiet); }
bool quiet() { return g_quiet.load(); }

void notice(const std::string& line) {
  if (quiet()) return;
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace sluice::cli
