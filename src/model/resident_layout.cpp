#include "model/resident_layout.h"

#include "util/error.h"

namespace sluice::model {

ResidentLayout parse_resident_layout(const std::string& s) {
  if (s == "packed") return ResidentLayout::Packed;
  if (s == "plain") return ResidentLayout::Plain;
  throw Error("--resident-layout: unknown layout '" + s + "' (expected packed or plain)");
}

const char* resident_layout_name(ResidentLayout l) {
  return l == ResidentLayout::Packed ? "packed" : "plain";
}

}  // namespace sluice::model
