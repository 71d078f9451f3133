#include "runtime/text_stream.h"

#include <algorithm>

namespace sluice::runtime {

TextStream::TextStream(std::vector<std::string> stop) {
  for (std::string& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
}

size_t incomplete_utf8_tail(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the lead byte.
  const size_t n = s.size();
  for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) need = 2;
    else if ((c & 0xF0) == 0xE0) need = 3;
    else if ((c & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;  // only continuation bytes (invalid): nothing to wait for
}

std::string TextStream::push(const std::string& piece) {
  if (stopped_) return {};
  text_ += piece;
  // A stop string can only newly appear where it overlaps the new piece or
  // the held-back tail.
  size_t longest = 0;
  for (const std::string& s : stop_) longest = std::max(longest, s.size());
  const size_t from = emitted_ >= longest ? emitted_ - longest + 1 : 0;
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) cut = std::min(cut, text_.find(s, from));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = cut > emitted_ ? text_.substr(emitted_, cut - emitted_) : std::string();
    emitted_ = std::max(emitted_, cut);
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stop_) {
    for (size_t k = std::min(s.size() - 1, text_.size() - emitted_); k > hold; --k) {
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  size_t end = text_.size() - hold;
  end -= incomplete_utf8_tail(std::string_view(text_).substr(0, end));
  if (end <= emitted_) return {};
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string TextStream::finish() {
  if (stopped_ || emitted_ >= text_.size()) return {};
  std::string out = text_.substr(emitted_);
  emitted_ = text_.size();
  return out;
}

}  // namespace sluice::runtime
