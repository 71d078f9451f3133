// The `logprobs` objects of OpenAI responses, from runtime::TokenLogprob.
//
// Chat (/v1/chat/completions): {"content": [{"token", "logprob", "bytes",
// "top_logprobs": [{"token", "logprob", "bytes"}...]}...], "refusal": null}.
// Completions (/v1/completions): {"tokens": [...], "token_logprobs": [...],
// "top_logprobs": [{token: logprob}...], "text_offset": [...]}.
// A token's text is its piece (token_to_piece without special rendering);
// "bytes" lists its UTF-8 bytes, which matter when a piece is part of a
// multi-byte character.
#pragma once

#include <nlohmann/json.hpp>
#include <span>

#include "runtime/logprobs.h"
#include "tokenizer/tokenizer.h"

namespace sluice::server {

nlohmann::json chat_logprobs(std::span<const runtime::TokenLogprob> lps,
                             const tokenizer::Tokenizer& tok);
// text_offset counts bytes from `first_offset` (the text already sent).
nlohmann::json completion_logprobs(std::span<const runtime::TokenLogprob> lps,
                                   const tokenizer::Tokenizer& tok, size_t first_offset);

}  // namespace sluice::server
