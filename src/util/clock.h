// Elapsed wall time on the monotonic clock, the one way sluice times things.
#pragma once

#include <chrono>

namespace sluice {

// Seconds from t0 to `now` (default: this instant) as a double; negative when
// `now` is earlier. steady_clock, so wall-clock changes do not skew it.
inline double seconds_since(
    std::chrono::steady_clock::time_point t0,
    std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
  return std::chrono::duration<double>(now - t0).count();
}

}  // namespace sluice
