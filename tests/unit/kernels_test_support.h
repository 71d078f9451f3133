// Shared by the kernel tests: the ISAs to loop over. Tests visit every ISA
// and skip those without kernels on this CPU (kernels_for / ops_for return
// nullptr there), so a new ISA's kernels are checked without editing a list.
#pragma once

#include <vector>

#include "kernels/quant.h"

namespace sluice::kernels {

// Every ISA but Scalar, in overlay order.
inline std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (int i = 1; i < kIsaCount; ++i) out.push_back(static_cast<Isa>(i));
  return out;
}

// Every ISA this CPU runs that has a Q8_0 vec_dot (every ISA with legacy
// kernels; AVX-VNNI has no F32 entry), Scalar first.
inline std::vector<Isa> isas_with_legacy_kernels() {
  std::vector<Isa> out;
  for (int i = 0; i < kIsaCount; ++i)
    if (kernels_for(GgmlType::Q8_0, static_cast<Isa>(i))) out.push_back(static_cast<Isa>(i));
  return out;
}

}  // namespace sluice::kernels
