// Internal to the element-wise ops: one fill function per ISA, combined by
// ops_registry.cpp. Not for use outside src/kernels and its tests.
#pragma once

#include "kernels/ops.h"

namespace sluice::kernels {

// Sets every entry.
void fill_ops_scalar(OpsKernels& k);
// Sets the entries with an AVX2+FMA version. Only on x86-64 builds; only
// called when the CPU has AVX2, FMA and F16C.
void fill_ops_avx2(OpsKernels& k);
// Slot for NEON (ops_neon.cpp): vfmaq_f32 dot/axpy, the same expf polynomial
// on float32x4_t. None yet, so ARM uses scalar.

}  // namespace sluice::kernels
