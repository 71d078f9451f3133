// --ngram: drafts for speculative decoding without a draft model (prompt
// lookup). Text that quotes its context (code being edited, a document being
// summarised with citations, a list being reformatted) repeats runs of tokens
// it has seen; when the last n tokens occurred earlier, what followed them then
// is a cheap guess for what follows now. The trunk verifies the guess exactly
// as it verifies MTP drafts (Session::generate), so greedy output is unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::runtime {

// The tokens that followed the most recent earlier occurrence of the last `n`
// tokens of `history` (the match may overlap the suffix itself), at most
// `max_tokens` of them and never past the end of `history`. Empty when history
// is shorter than n + 1, when the suffix occurred nowhere earlier, or when
// n <= 0 or max_tokens <= 0. The most recent occurrence is taken because
// generation tends to continue the latest copy (a loop, the current quote).
std::vector<int32_t> ngram_draft(std::span<const int32_t> history, int n, int max_tokens);

}  // namespace sluice::runtime
