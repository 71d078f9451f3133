// Tokenizer built from GGUF `tokenizer.ggml.*` metadata, reproducing
// llama.cpp's llama_tokenize / token_to_piece for the two vocab kinds MoE
// models ship with:
//   * "llama": SentencePiece-style (score-driven merges, U+2581 spaces,
//     optional space prefix, <0xXX> byte fallback);
//   * "gpt2":  byte-level BPE with merge ranks and a pre-tokenizer chosen by
//     `tokenizer.ggml.pre` (see pretokenizer.h for the families).
//
// Thread-safety: immutable after from_gguf(); all methods are const and may be
// called concurrently. Copies are cheap (shared immutable state).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"

namespace sluice::tokenizer {

struct Vocab;
class PreTokenizer;

class Tokenizer {
 public:
  // Throws sluice::Error naming the file when the tokenizer metadata is
  // missing, inconsistent, or of an unsupported kind.
  static Tokenizer from_gguf(const gguf::Metadata& md);

  // Token ids for `text` (raw UTF-8 bytes; invalid UTF-8 is accepted).
  // add_special: prepend BOS / append EOS as the vocab's add_bos/add_eos say.
  // parse_special: text of CONTROL (and unknown) tokens, e.g. "<|im_end|>",
  // becomes that token. USER_DEFINED tokens are always matched, as in llama.cpp.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes token `id` stands for. Pieces may be partial UTF-8: a streaming
  // caller concatenates bytes and only then interprets them. Control/unknown
  // tokens yield their text when render_special, else "". Throws sluice::Error
  // for an id outside [0, n_vocab).
  std::string token_to_piece(int32_t id, bool render_special = true) const;

  // Concatenated pieces. For SPM vocabs with add_space_prefix, the one space
  // the encoder prepended is removed from the first token after an optional
  // leading BOS, so decode(encode(x)) == x for text without unknown chars.
  std::string decode(std::span<const int32_t> ids, bool render_special = true) const;

  int32_t bos() const;  // -1 when the vocab has none
  int32_t eos() const;
  int32_t eot() const;
  int32_t unk() const;
  int32_t pad() const;
  int32_t n_vocab() const;
  bool is_eog(int32_t id) const;      // EOS, EOT, EOM and end-of-turn texts
  bool is_control(int32_t id) const;  // CONTROL or UNKNOWN attribute
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;

  const std::string& model_name() const;  // tokenizer.ggml.model
  const std::string& pre_name() const;    // tokenizer.ggml.pre ("" if absent)
  bool pre_known() const;                 // false: name unrecognised, llama.cpp's default splitter used

  const std::string& token_text(int32_t id) const;  // stored text; throws for a bad id
  int32_t find_token(std::string_view text) const;  // -1 if absent

  ~Tokenizer();
  Tokenizer(const Tokenizer&);
  Tokenizer& operator=(const Tokenizer&);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace sluice::tokenizer
