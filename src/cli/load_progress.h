// A one-line progress bar on stderr for loading the dense weights, drawn only
// when stderr is a terminal (pipes and log files get nothing, so test output
// and captured logs stay clean).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>

#include "moe/dense_weights.h"

namespace sluice::cli {

// Returns an empty callback when stderr is not a TTY. The callback owns its
// state (shared_ptr), so copies of it (ModelConfig is copied into the model)
// never dangle. Redraws only when the whole percentage changes; ends the line
// when done == total.
inline moe::LoadProgressFn tty_load_progress(const char* what) {
  if (!::isatty(STDERR_FILENO)) return {};
  struct State {
    const char* what;
    int last_percent = -1;
  };
  auto st = std::make_shared<State>(State{what});
  return [st](uint64_t done, uint64_t total) {
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (percent == st->last_percent) return;
    st->last_percent = percent;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
    bar[kWidth] = '\0';
    std::fprintf(stderr, "\r%s [%s] %3d%% %.1f/%.1f MiB", st->what, bar, percent, done / 1048576.0,
                 total / 1048576.0);
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

}  // namespace sluice::cli
