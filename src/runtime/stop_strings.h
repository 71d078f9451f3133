// Stop strings on streamed text: generation stops at the first occurrence of
// any of them, and none of a stop string is ever shown. Text that could still
// be the start of a stop string is held back until the next piece decides it.
#pragma once

#include <string>
#include <vector>

namespace sluice::runtime {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);  // empty strings are ignored

  // Appends a decoded piece. Returns the text now safe to show; stopped()
  // turns true when a stop string completed (the text before it is returned,
  // the rest is dropped).
  std::string push(const std::string& piece);
  // The held-back text when generation ends without a stop.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace sluice::runtime
