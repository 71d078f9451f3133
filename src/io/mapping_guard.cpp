#include "io/mapping_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace sluice::io {
namespace {

struct Slot {
  std::atomic<bool> taken{false};   // owned by a live guard (registration only)
  std::atomic<uintptr_t> begin{0};  // 0: not armed; published last
  std::atomic<uintptr_t> end{0};
  char msg[768] = {};
  size_t msg_len = 0;
};

Slot g_slots[kMaxGuards];
struct sigaction g_previous {};
std::once_flag g_install_once;

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  for (Slot& s : g_slots) {
    const uintptr_t b = s.begin.load(std::memory_order_acquire);
    if (b == 0 || addr < b || addr >= s.end.load(std::memory_order_acquire)) continue;
    for (size_t done = 0; done < s.msg_len;) {
      const ssize_t w = ::write(STDERR_FILENO, s.msg + done, s.msg_len - done);
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    ::_exit(kMappedFileExitCode);
  }
  // Not ours: behave as if this handler had never been installed.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    // Default action: restore it and return; the faulting access runs again
    // and the kernel kills the process with SIGBUS as usual.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGBUS, &dfl, nullptr);
  }
}

void install_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

MappingGuard::MappingGuard(const void* p, size_t n, const std::string& path) {
  if (p == nullptr || n == 0) return;
  std::call_once(g_install_once, install_handler);
  for (int i = 0; i < kMaxGuards; ++i) {
    Slot& s = g_slots[i];
    bool expected = false;
    if (!s.taken.compare_exchange_strong(expected, true)) continue;
    const std::string text = "sluice: error: model file " + path +
                             " changed or was truncated while mapped (--dense-weights mmap/warm read it in "
                             "place); the run cannot continue\n";
    s.msg_len = std::min(text.size(), sizeof s.msg);
    std::memcpy(s.msg, text.data(), s.msg_len);
    s.msg[s.msg_len - 1] = '\n';  // also when a very long path was cut
    const auto b = reinterpret_cast<uintptr_t>(p);
    s.end.store(b + n, std::memory_order_release);
    s.begin.store(b, std::memory_order_release);  // arms the slot
    slot_ = i;
    return;
  }
}

MappingGuard::~MappingGuard() {
  if (slot_ < 0) return;
  Slot& s = g_slots[slot_];
  s.begin.store(0, std::memory_order_release);  // disarm before the range is unmapped
  s.taken.store(false, std::memory_order_release);
}

}  // namespace sluice::io
