// Byte-level BPE (GPT-2 style) with llama.cpp's merge loop
// (llm_tokenizer_bpe_session): characters of the byte-mapped word are merged
// pairwise, lowest merge rank first (ties: leftmost), until no ranked pair is
// left; each final symbol is then looked up in the vocab.
#include <array>
#include <queue>

#include "tokenizer/encoders.h"

namespace sluice::tokenizer {
namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes map to U+0100.. in byte order.
struct ByteMap {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 512> from_cp;  // code point -> byte, -1 if not a mapped code point

  ByteMap() {
    from_cp.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : 256u + static_cast<uint32_t>(extra++);
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {  // all mapped code points are < 0x800: two bytes
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      to_char[b] = std::move(s);
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

struct Symbol {
  size_t offset = 0;
  size_t len = 0;  // 0 once merged away
  int prev = -1;
  int next = -1;
};

struct Bigram {
  int left = 0;
  int right = 0;
  int32_t rank = 0;
  size_t left_len = 0;   // symbol lengths when queued; a mismatch later means stale
  size_t right_len = 0;
};

// Priority: lowest rank first, then the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

const std::string& byte_to_gpt2_char(uint8_t b) { return byte_map().to_char[b]; }

std::string gpt2_chars_to_bytes(std::string_view text) {
  const ByteMap& m = byte_map();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(utf8_seq_len(text[i]), text.size() - i);
    int cp = -1;
    if (n == 1 && static_cast<uint8_t>(text[i]) < 0x80) {
      cp = static_cast<uint8_t>(text[i]);
    } else if (n == 2 && (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((static_cast<uint8_t>(text[i]) & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
    }
    if (cp >= 0 && cp < 512 && m.from_cp[cp] >= 0) {
      out.push_back(static_cast<char>(m.from_cp[cp]));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

void bpe_encode_word(const Vocab& vocab, std::string_view raw_word, std::vector<int32_t>& out) {
  std::string word;
  if (vocab.spm_bpe) {
    word = raw_word;  // merges over the raw (U+2581-escaped) UTF-8
  } else {
    word.reserve(raw_word.size() * 2);
    for (char c : raw_word) word += byte_to_gpt2_char(static_cast<uint8_t>(c));
  }
  if (word.empty()) return;

  if (vocab.ignore_merges) {
    if (int32_t id = vocab.find(word); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }

  std::vector<Symbol> symbols;
  for (size_t off = 0; off < word.size();) {
    Symbol s;
    s.offset = off;
    s.len = std::min(utf8_seq_len(word[off]), word.size() - off);
    off += s.len;
    s.prev = static_cast<int>(symbols.size()) - 1;
    s.next = off == word.size() ? -1 : static_cast<int>(symbols.size()) + 1;
    symbols.push_back(s);
  }
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto text_of = [&](const Symbol& s) { return std::string_view(word).substr(s.offset, s.len); };
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t rank = vocab.merge_rank(text_of(symbols[left]), text_of(symbols[right]));
    if (rank < 0) return;
    queue.push(Bigram{left, right, rank, symbols[left].len, symbols[right].len});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    // Symbols only grow and stay adjacent to their offsets, so equal lengths
    // (and r still being l's neighbour) mean the queued pair is still current.
    if (l.len == 0 || r.len == 0 || l.len != b.left_len || r.len != b.right_len || l.next != b.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text_of(symbols[i]);
    if (int32_t id = vocab.find(piece); id != kNoToken) {
      out.push_back(id);
      continue;
    }
    // Not a token (a vocab/merges mismatch, or a character outside a
    // SentencePiece-style vocab): emit byte tokens where they exist.
    for (char c : piece) {
      if (vocab.spm_bpe) {
        static constexpr char kHex[] = "0123456789ABCDEF";
        const auto b = static_cast<uint8_t>(c);
        const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
        if (int32_t id = vocab.find(std::string_view(name, 6)); id != kNoToken) out.push_back(id);
      } else if (int32_t id = vocab.find(std::string_view(&c, 1)); id != kNoToken) {
        out.push_back(id);
      }
    }
  }
}

}  // namespace sluice::tokenizer
