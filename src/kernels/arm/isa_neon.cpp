// The AArch64 Advanced SIMD (NEON) set (kernel_table.h). Nothing yet: every
// type and op falls back to scalar on ARM.
#include "kernels/kernel_table.h"

namespace sluice::kernels {

void fill_isa_neon(IsaKernels&) {}

}  // namespace sluice::kernels
