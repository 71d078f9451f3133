// Tokenizer: special-token partitioning, dispatch to the SPM / BPE encoders,
// and piece decoding.
#include "tokenizer/tokenizer.h"

#include <utility>

#include "tokenizer/encoders.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace sluice::tokenizer {

struct Tokenizer::Impl {
  Vocab vocab;
  PreInfo pre;
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // BPE only
};

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// A span of the input that is either raw text or one already-chosen token.
struct Fragment {
  int32_t token = kNoToken;  // kNoToken: raw text [offset, offset + length)
  size_t offset = 0;
  size_t length = 0;
};

// Cuts every occurrence of the vocab's special tokens out of `text`, longest
// token text first, left to right within each remaining text fragment
// (llama.cpp's tokenizer_st_partition, without per-token lstrip/rstrip).
std::vector<Fragment> partition_special(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{kNoToken, 0, text.size()});
  for (int32_t id : vocab.special_by_length) {
    if (!parse_special && (vocab.attrs[id] & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = vocab.texts[id];
    if (tok.empty()) continue;
    std::vector<Fragment> next;
    next.reserve(frags.size());
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        next.push_back(f);
        continue;
      }
      const std::string_view body = text.substr(f.offset, f.length);
      size_t pos = 0;
      for (size_t hit; (hit = body.find(tok, pos)) != std::string_view::npos; pos = hit + tok.size()) {
        if (hit > pos) next.push_back(Fragment{kNoToken, f.offset + pos, hit - pos});
        next.push_back(Fragment{id, 0, 0});
        changed = true;
      }
      if (pos < body.size()) next.push_back(Fragment{kNoToken, f.offset + pos, body.size() - pos});
    }
    if (changed) frags = std::move(next);
  }
  return frags;
}

std::string escape_spaces(std::string_view text, bool prefix_space) {
  std::string out;
  out.reserve(text.size() + 8);
  if (prefix_space) out += kSpmSpace;
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(const Tokenizer&) = default;
Tokenizer& Tokenizer::operator=(const Tokenizer&) = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_gguf(const gguf::Metadata& md) {
  auto impl = std::make_shared<Impl>();
  impl->vocab = load_vocab(md);
  if (impl->vocab.kind == VocabKind::kBpe) {
    impl->pre = lookup_pre(impl->vocab.pre_name);
    impl->pre_tokenizer = std::make_unique<PreTokenizer>(impl->pre.family);
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const Vocab& v = impl_->vocab;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && v.add_bos && v.bos != kNoToken) out.push_back(v.bos);

  const std::vector<Fragment> frags = partition_special(v, text, parse_special);
  if (v.kind == VocabKind::kSpm) {
    bool after_special = true;  // the space prefix goes at the start and after each special token
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      const std::string escaped = escape_spaces(text.substr(f.offset, f.length), v.add_space_prefix && after_special);
      spm_encode(v, escaped, out);
      after_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.token != kNoToken) {
        out.push_back(f.token);
        continue;
      }
      if (v.spm_bpe) {
        // Gemma 4: spaces escaped first; a run of newlines that is itself a
        // token is taken whole (llama.cpp's gemma4 rule).
        const std::string escaped = escape_spaces(text.substr(f.offset, f.length), false);
        for (std::string_view word : impl_->pre_tokenizer->split(escaped)) {
          const int32_t id = word.find_first_not_of('\n') == std::string_view::npos ? v.find(word) : kNoToken;
          if (id != kNoToken) {
            out.push_back(id);
          } else {
            bpe_encode_word(v, word, out);
          }
        }
        continue;
      }
      for (std::string_view word : impl_->pre_tokenizer->split(text.substr(f.offset, f.length))) {
        bpe_encode_word(v, word, out);
      }
    }
  }

  if (add_special && v.add_eos && v.eos != kNoToken) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Vocab& v = impl_->vocab;
  if (id < 0 || id >= v.n_tokens()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is out of range (vocab has " +
                std::to_string(v.n_tokens()) + " tokens)");
  }
  const uint32_t attr = v.attrs[id];
  const std::string& text = v.texts[id];
  if (attr & (kAttrControl | kAttrUnknown)) return render_special ? text : std::string();
  if (attr & kAttrUserDefined) return text;
  if (v.kind == VocabKind::kSpm || v.spm_bpe) {
    if (attr & kAttrNormal) return unescape_spaces(text);
    if (attr & kAttrByte) {
      if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
        const int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
        if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
      }
      return text;  // a BYTE token not spelled <0xXX>: its text is the best we have
    }
    return std::string();  // UNUSED / UNDEFINED
  }
  if (attr & kAttrNormal) return gpt2_chars_to_bytes(text);
  return std::string();
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const Vocab& v = impl_->vocab;
  std::string out;
  size_t i = 0;
  if (!ids.empty() && v.bos != kNoToken && ids[0] == v.bos) {
    out += token_to_piece(ids[0], render_special);
    i = 1;
  }
  bool strip_space = v.add_space_prefix;
  for (; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

int32_t Tokenizer::bos() const { return impl_->vocab.bos; }
int32_t Tokenizer::eos() const { return impl_->vocab.eos; }
int32_t Tokenizer::eot() const { return impl_->vocab.eot; }
int32_t Tokenizer::unk() const { return impl_->vocab.unk; }
int32_t Tokenizer::pad() const { return impl_->vocab.pad; }
int32_t Tokenizer::n_vocab() const { return impl_->vocab.n_tokens(); }
bool Tokenizer::is_eog(int32_t id) const { return impl_->vocab.eog.count(id) > 0; }
bool Tokenizer::is_control(int32_t id) const {
  const Vocab& v = impl_->vocab;
  return id >= 0 && id < v.n_tokens() && (v.attrs[id] & (kAttrControl | kAttrUnknown)) != 0;
}
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->vocab.add_space_prefix; }
const std::string& Tokenizer::model_name() const { return impl_->vocab.model_name; }
const std::string& Tokenizer::pre_name() const { return impl_->vocab.pre_name; }
bool Tokenizer::pre_known() const { return impl_->vocab.kind == VocabKind::kSpm || impl_->pre.known; }

const std::string& Tokenizer::token_text(int32_t id) const {
  const Vocab& v = impl_->vocab;
  if (id < 0 || id >= v.n_tokens()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is out of range (vocab has " +
                std::to_string(v.n_tokens()) + " tokens)");
  }
  return v.texts[id];
}

int32_t Tokenizer::find_token(std::string_view text) const { return impl_->vocab.find(text); }

}  // namespace sluice::tokenizer
