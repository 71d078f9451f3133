// Lookup tables shared by several formats (values from the format definitions).
#pragma once

#include <cstdint>

namespace sluice::kernels {

// IQ4_NL / IQ4_XS: the 16 non-linear 4-bit levels (int8, scaled by the block's d).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4: FP4 E2M1 code -> value x2, so every value is an integer and fits int8
// (0.5 -> 1, 6 -> 12). Code bit 3 is the sign, bits 0-2 index the magnitudes
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}. Because the values are doubled, the block's
// E8M0 scale 2^(e-127) is applied halved, as 2^(e-128) (e8m0_to_fp32_half in
// blocks_legacy.h): x = kMxfp4Values[code] * 2^(e-128) = E2M1(code) * 2^(e-127).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace sluice::kernels
