#include "model/binder.h"

namespace sluice::model {

std::string shape_str(const std::vector<uint64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

bool same_shape(std::vector<uint64_t> ne, std::vector<uint64_t> want) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  while (want.size() > 1 && want.back() == 1) want.pop_back();
  return ne == want;
}

}  // namespace sluice::model
