// Internal to the NEON kernels: the element-wise ops (ops_neon.cpp).
#pragma once

#include "kernels/kernel_table.h"

namespace sluice::kernels {

#if defined(__aarch64__)
// dot, dot_rows, sum_squares, exp_sub_sum, swiglu, bit-identical to AVX2's.
void fill_ops_neon(OpsKernels& k);
#endif

}  // namespace sluice::kernels
