// Internal to the NEON kernels: the K-quant registration (kquant_neon.cpp).
#pragma once

#include "kernels/arm/neon_tier.h"
#include "kernels/kernel_table.h"

namespace sluice::kernels {

#if defined(__aarch64__)
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS x Q8_K: vec_dot and vec_dot_cols, in the float
// order of the x86 kernels (x86/kquant_avx2.cpp, x86/kquant_x86_dot_body.h), so they give
// AVX2's bits. The sdot build where
// the CPU has it (cpu_features().neon_dotprod), the plain one elsewhere.
void fill_kquant_neon(KernelTable& table);

// The same entries of one named build, for tests that check both builds on
// one CPU. The caller must only run the Dotprod entries on a CPU with sdot.
void fill_kquant_neon_tier(KernelTable& table, NeonTier tier);
#endif

}  // namespace sluice::kernels
