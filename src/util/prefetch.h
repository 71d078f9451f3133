// Software prefetch of a byte range, for streams the hardware prefetcher does
// not follow (short weight rows in decode, a head's slice of each KV row).
// Speed only: never changes a value.
#pragma once

#include <cstddef>

namespace sluice {

// Hints every 64-byte line of [p, p + bytes) into all cache levels, for reading.
inline void prefetch_bytes(const void* p, size_t bytes) {
  const auto* b = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(b + off, 0, 3);
}

}  // namespace sluice
