// Internal to the NEON kernels: the two builds of each NEON kernel family.
#pragma once

namespace sluice::kernels {

#if defined(__aarch64__)
// Widening multiplies (every AArch64 CPU) and the armv8.2-a dot product
// (sdot). The two builds of a kernel give the same bits; the registry picks
// the sdot one where cpu_features().neon_dotprod says the CPU has it.
enum class NeonTier { Plain, Dotprod };
#endif

}  // namespace sluice::kernels
