// Vocabulary as read from GGUF `tokenizer.ggml.*` metadata: token texts, scores,
// attributes, special ids and the tokenizer flags, with llama.cpp's defaults
// and overrides applied (see load_vocab). Pure data; shared read-only by the
// SPM and BPE encoders and the decoder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gguf/gguf.h"

namespace sluice::tokenizer {

// Per-token attribute bits (llama.cpp's llama_token_attr). A token may carry
// several, e.g. USER_DEFINED | CONTROL when a control-looking text is promoted.
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
};

enum class VocabKind { kSpm, kBpe };

inline constexpr int32_t kNoToken = -1;

struct Vocab {
  VocabKind kind = VocabKind::kSpm;
  std::string model_name;  // tokenizer.ggml.model ("llama", "gpt2", "gemma4")
  std::string pre_name;    // tokenizer.ggml.pre ("" when absent)
  std::string source;      // file name for error messages

  std::vector<std::string> texts;   // id -> token text (as stored: U+2581 / GPT-2 byte chars)
  std::vector<float> scores;        // id -> SPM score (0 when absent)
  std::vector<uint32_t> attrs;      // id -> TokenAttr bits
  std::unordered_map<std::string, int32_t> text_to_id;  // duplicates: the last id wins (as llama.cpp)

  // BPE merge ranks keyed by merge_key(left, right); the first listing of a pair wins.
  std::unordered_map<std::string, int32_t> merge_ranks;

  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken;
  int32_t unk = kNoToken, pad = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prepend ' ' to text (and strip it when decoding)
  bool ignore_merges = false;     // BPE (llama3): a pre-token that is itself a token is emitted whole
  bool spm_bpe = false;           // BPE over U+2581-escaped raw UTF-8 with <0xXX> bytes (PreInfo::spm_bpe, Gemma 4)

  std::unordered_set<int32_t> eog;        // end-of-generation ids
  std::vector<int32_t> special_by_length;  // CONTROL/USER_DEFINED/UNKNOWN ids, longest text first

  int32_t n_tokens() const { return static_cast<int32_t>(texts.size()); }
  int32_t find(std::string_view text) const {
    auto it = text_to_id.find(std::string(text));
    return it == text_to_id.end() ? kNoToken : it->second;
  }
  int32_t merge_rank(std::string_view left, std::string_view right) const {
    auto it = merge_ranks.find(merge_key(left, right));
    return it == merge_ranks.end() ? -1 : it->second;
  }
  // Unambiguous key for a (left, right) pair: 4-byte length of left, then both texts.
  static std::string merge_key(std::string_view left, std::string_view right);
};

// Builds the vocabulary. Throws sluice::Error naming the source file when the
// tokenizer model is missing/unsupported or the arrays are inconsistent.
Vocab load_vocab(const gguf::Metadata& md);

}  // namespace sluice::tokenizer
