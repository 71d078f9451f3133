// gtest's name for a parameterized case given by a case or file name
// ("gemma4-f32", "golden/x.gguf"): every character that is not a letter or a
// digit becomes '_' (gtest accepts only those). One definition for the suites
// that run over the golden cases.
#pragma once

#include <cctype>
#include <string>

namespace sluice::test {

struct CaseName {
  template <class ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    std::string s = info.param;
    for (char& ch : s)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
  }
};

}  // namespace sluice::test
