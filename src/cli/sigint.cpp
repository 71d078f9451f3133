#include "cli/sigint.h"

#include <atomic>

namespace sluice::cli {
namespace {
std::atomic<bool> g_sigint{false};
extern "C" void on_sigint(int) { g_sigint.store(true); }
}  // namespace

SigintToFlag::SigintToFlag() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART
  ::sigaction(SIGINT, &sa, &old_);
}

SigintToFlag::~SigintToFlag() {
  ::sigaction(SIGINT, &old_, nullptr);
}

bool sigint_received() { return g_sigint.load(); }
void clear_sigint() { g_sigint.store(false); }

}  // namespace sluice::cli
