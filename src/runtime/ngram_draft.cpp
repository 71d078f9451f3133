#include "runtime/ngram_draft.h"

#include <algorithm>

namespace sluice::runtime {

std::vector<int32_t> ngram_draft(std::span<const int32_t> history, int n, int max_tokens) {
  const auto len = static_cast<std::ptrdiff_t>(history.size());
  if (n <= 0 || max_tokens <= 0 || len < n + 1) return {};
  const auto suffix = history.last(static_cast<size_t>(n));
  // Candidate matches end at e (exclusive) with e < len, latest first; a match
  // ending at len would be the suffix itself.
  for (std::ptrdiff_t e = len - 1; e >= n; --e) {
    if (!std::equal(suffix.begin(), suffix.end(), history.begin() + (e - n))) continue;
    const std::ptrdiff_t take = std::min<std::ptrdiff_t>(max_tokens, len - e);
    return std::vector<int32_t>(history.begin() + e, history.begin() + e + take);
  }
  return {};
}

}  // namespace sluice::runtime
