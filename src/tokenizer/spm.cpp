// SentencePiece-style encoder with llama.cpp's semantics (llm_tokenizer_spm):
// start from UTF-8 characters, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring vocab token (ties: leftmost), then map
// each final symbol to a token, resegmenting unknown symbols along the merges
// that built them and falling back to byte tokens.
#include <algorithm>
#include <cstdio>
#include <queue>
#include <unordered_map>
#include <utility>

#include "tokenizer/encoders.h"

namespace sluice::tokenizer {
namespace {

struct SpmSymbol {
  size_t offset = 0;  // into the text
  size_t len = 0;     // 0 once merged into its left neighbour
  int prev = -1;
  int next = -1;
};

struct SpmBigram {
  int left = 0;
  int right = 0;
  float score = 0;
  size_t len = 0;  // byte length of the merged text; detects stale entries
};

// Priority: higher score first, then the leftmost pair.
struct SpmBigramOrder {
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const Vocab& vocab, std::string_view text) : vocab_(vocab), text_(text) {}

  void run(std::vector<int32_t>& out) {
    for (size_t off = 0; off < text_.size();) {
      SpmSymbol s;
      s.offset = off;
      s.len = std::min(utf8_seq_len(text_[off]), text_.size() - off);
      off += s.len;
      s.prev = static_cast<int>(symbols_.size()) - 1;
      s.next = off == text_.size() ? -1 : static_cast<int>(symbols_.size()) + 1;
      symbols_.push_back(s);
    }
    for (size_t i = 1; i < symbols_.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

    while (!queue_.empty()) {
      const SpmBigram b = queue_.top();
      queue_.pop();
      SpmSymbol& l = symbols_[b.left];
      SpmSymbol& r = symbols_[b.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // outdated
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  std::string_view text_of(const SpmSymbol& s) const { return text_.substr(s.offset, s.len); }

  void try_add(int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view merged = text_.substr(symbols_[left].offset, symbols_[left].len + symbols_[right].len);
    const int32_t id = vocab_.find(merged);
    if (id == kNoToken) return;
    queue_.push(SpmBigram{left, right, vocab_.scores[id], merged.size()});
    rev_merge_[std::string(merged)] = {left, right};
  }

  void resegment(const SpmSymbol& s, std::vector<int32_t>& out) const {
    const std::string_view text = text_of(s);
    if (int32_t id = vocab_.find(text); id != kNoToken) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge_.find(std::string(text));
    if (it == rev_merge_.end()) {
      for (char c : text) push_byte(static_cast<uint8_t>(c), out);
      return;
    }
    resegment(symbols_[it->second.first], out);
    resegment(symbols_[it->second.second], out);
  }

  void push_byte(uint8_t byte, std::vector<int32_t>& out) const {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", byte);
    int32_t id = vocab_.find(hex);
    if (id == kNoToken) id = vocab_.find(std::string(1, static_cast<char>(byte)));
    if (id == kNoToken) id = vocab_.unk;
    if (id != kNoToken) out.push_back(id);  // no byte token and no unk: the byte is dropped
  }

  const Vocab& vocab_;
  std::string_view text_;
  std::vector<SpmSymbol> symbols_;
  std::priority_queue<SpmBigram, std::vector<SpmBigram>, SpmBigramOrder> queue_;
  // Merged text -> the two symbols it was built from (last writer wins, as llama.cpp).
  std::unordered_map<std::string, std::pair<int, int>> rev_merge_;
};

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  SpmSession(vocab, text).run(out);
}

}  // namespace sluice::tokenizer
