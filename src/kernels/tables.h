// Lookup tables shared by several formats (values from the format definitions).
#pragma once

#include <cstdint>

namespace sluice::kernels {

// IQ4_NL / IQ4_XS: the 16 non-linear 4-bit levels (int8, scaled by the block's d).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4: FP4 E2M1 code -> value, doubled so it fits int8 (0.5 -> 1, 6 -> 12);
// the block scale is applied as 2^(e - 128) to compensate the doubling... see
// mxfp4 code for the exact convention (E8M0 scale: 2^(e-127), value/2).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace sluice::kernels
