// The AArch64 Advanced SIMD (NEON) set (kernel_table.h). What it lacks falls
// back to scalar: the K-quant, Q4_1/Q5_0/Q5_1 and plain-float dots, every
// dequantizer and quantizer, and the element-wise ops.
#include "kernels/arm/legacy_neon.h"

namespace sluice::kernels {

#if defined(__aarch64__)
void fill_isa_neon(IsaKernels& k) { fill_legacy_neon(k.quant); }
#else  // not an AArch64 build: the slot stays empty
void fill_isa_neon(IsaKernels&) {}
#endif

}  // namespace sluice::kernels
