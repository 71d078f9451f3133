// Pre-tokenization for byte-level BPE vocabularies: splits raw text into the
// pieces ("words") that BPE merges are applied within, following the regex
// list that llama.cpp associates with each `tokenizer.ggml.pre` name.
//
// Every family is run through PCRE2 (UTF + Unicode properties, JIT when
// available). A list of regexes is applied in sequence: each regex splits every
// piece produced so far into its matches and the gaps between them (HF
// `Split(behavior=Isolated)`), and each piece is its own subject, so `$` and
// lookaheads never see past the piece. Where llama.cpp's splitter differs from
// the upstream regex (gpt-4o's adapted letter classes, Kimi-K2's custom C++
// splitter), the regex here reproduces llama.cpp.
//
// Invalid UTF-8 never matches (PCRE2_MATCH_INVALID_UTF), so such bytes end up
// in gap pieces and still round-trip through byte-level BPE.
//
// Thread-safety: immutable after construction; split() may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tokenizer {

enum class PreFamily {
  kDefault,  // llama.cpp's fallback for a missing/unknown name
  kGpt2,
  kLlama3,
  kDbrx,  // llama3 regex without ignore_merges/add_bos
  kDeepseekLlm,
  kDeepseekCoder,
  kDeepseekV3,
  kFalcon,
  kStarcoder,
  kQwen2,
  kQwen35,
  kChatGlm4,
  kGpt4o,
  kKimiK2,
  kTekken,
  kPoro,
  kViking,
  kBailingMoe,
  kSeedCoder,
  kGemma4,  // lines and newline runs only: BPE merges run over the whole U+2581-escaped line
};

// What a `tokenizer.ggml.pre` name selects, with the vocab flags llama.cpp
// ties to it.
struct PreInfo {
  PreFamily family = PreFamily::kDefault;
  bool known = false;          // false: name missing or not recognised (kDefault used)
  bool ignore_merges = false;  // whole-word vocab lookup before BPE
  bool add_bos = false;        // BOS added by default (before the add_bos_token key)
  bool no_bos = false;         // the family has no BOS (glm4)
  // SentencePiece-style BPE (Gemma 4; llama.cpp's escape_whitespaces without
  // byte_encode): spaces escaped to U+2581, merges over raw UTF-8, bytes that
  // are no token become <0xXX> tokens; BOS always added.
  bool spm_bpe = false;
};

PreInfo lookup_pre(std::string_view name);

class PreTokenizer {
 public:
  // Compiles the family's regexes. Throws sluice::Error if PCRE2 rejects one
  // (a build problem, e.g. PCRE2 without Unicode support).
  explicit PreTokenizer(PreFamily family);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Pieces of `text`, in order, covering it exactly (views into `text`).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace sluice::tokenizer
