// Turns generated token pieces into the text a client may see, incrementally.
//
// Contract: push() appends a piece and returns the text that is now safe to
// emit; finish() returns what remains. The concatenation of everything
// returned equals the generated text cut before the first occurrence of any
// stop string (the stop string itself is never emitted), and each returned
// chunk ends on a UTF-8 character boundary except possibly finish()'s (a
// model may stop mid-character). Text that could still become the start of a
// stop string, or is an incomplete UTF-8 sequence, is held back until the
// next piece decides it. So streamed and non-streamed output are identical.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice::runtime {

class TextStream {
 public:
  // Empty stop strings are ignored (they would match at once).
  explicit TextStream(std::vector<std::string> stop);

  std::string push(const std::string& piece);
  std::string finish();
  bool stopped() const { return stopped_; }  // a stop string was found
  const std::string& text() const { return text_; }  // everything generated so far (before cutting)

 private:
  std::vector<std::string> stop_;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

// Bytes at the end of s that begin a UTF-8 sequence not yet complete (0..3).
size_t incomplete_utf8_tail(std::string_view s);

}  // namespace sluice::runtime
