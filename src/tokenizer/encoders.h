// The two subword encoders, each applied to one raw-text fragment (special
// tokens have already been cut out). Both append ids to `out`.
//
// Contracts: never throw on any byte sequence (invalid UTF-8 included); every
// id appended is a valid id of `vocab`. Thread-safe (no shared mutable state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace sluice::tokenizer {

// SentencePiece-style (llama.cpp "SPM"): `text` must already have spaces
// escaped to U+2581. Score-driven bigram merging over UTF-8 characters; a
// final symbol that is not a token is resegmented along its merge history,
// and whatever is left falls back to <0xXX> byte tokens (then unk).
void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// Byte-level BPE on one pre-tokenized word given in raw bytes: the bytes are
// mapped to GPT-2's printable code points, then merged by rank.
void bpe_encode_word(const Vocab& vocab, std::string_view word, std::vector<int32_t>& out);

// GPT-2 byte <-> unicode mapping.
const std::string& byte_to_gpt2_char(uint8_t b);  // UTF-8 of the code point standing for byte b
// Decodes a GPT-2-mapped token text back to raw bytes; code points outside
// the mapping are copied through as their UTF-8.
std::string gpt2_chars_to_bytes(std::string_view text);

// Length of the UTF-8 sequence introduced by lead byte c (1 for continuation
// or invalid bytes), as llama.cpp counts characters.
inline size_t utf8_seq_len(char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(c) >> 4];
}

}  // namespace sluice::tokenizer
