// Internal to the NEON kernels: the legacy-format registration (legacy_neon.cpp).
#pragma once

#include "kernels/arm/neon_tier.h"
#include "kernels/kernel_table.h"

namespace sluice::kernels {

#if defined(__aarch64__)
// Q4_0, Q8_0, IQ4_NL, MXFP4: vec_dot and vec_dot_cols; F32, F16, BF16:
// vec_dot. All in the x86 kernels' float order (bit-identical to AVX2's); the
// dot-product (sdot) build where the CPU has it.
void fill_legacy_neon(KernelTable& table);
// Q4_0, Q8_0, IQ4_NL, MXFP4 of one named build (bench/neon_icount.sh counts
// both on one CPU). The caller must only run the Dotprod entries on a CPU with sdot.
void fill_legacy_neon_tier(KernelTable& table, NeonTier tier);
#endif

}  // namespace sluice::kernels
