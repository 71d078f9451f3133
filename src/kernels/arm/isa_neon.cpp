// The AArch64 Advanced SIMD (NEON) set (kernel_table.h). What it lacks falls
// back to scalar: every dequantizer and quantizer, and the ops that are
// bit-identical to scalar on x86 too.
#include "kernels/arm/kquant_neon.h"
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
#else  // not an AArch64 build: the slot stays empty
void fill_isa_neon(IsaKernels&) {}
#endif

}  // namespace sluice::kernels
