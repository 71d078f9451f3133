// The AArch64 Advanced SIMD (NEON) set (kernel_table.h). What it lacks falls
// back to scalar: every dequantizer and quantizer, and the ops that are
// bit-identical to scalar on x86 too.
#include "kernels/arm/kquant_neon.h"
#include "kernels/kernel_table.h"
#include "kernels/arm/legacy_neon.h"
#include "kernels/arm/ops_neon.h"

namespace sluice::kernels {

#if defined(__aarch64__)
void fill_isa_neon(IsaKernels& k) {
  fill_legacy_neon(k.quant);
  fill_kquant_neon(k.quant);
  fill_ops_neon(k.ops);
  fill_deltanet_neon(k.ops);
}
// Only Q4_K: the other formats keep their NEON entries (and their x86 bits).
void fill_isa_neon_i8mm(IsaKernels& k) { fill_i8mm_q4k(k.quant); }
#else  // not an AArch64 build: the slots stay empty
void fill_isa_neon(IsaKernels&) {}
void fill_isa_neon_i8mm(IsaKernels&) {}
#endif

}  // namespace sluice::kernels
