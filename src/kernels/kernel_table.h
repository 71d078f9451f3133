// Internal: how format families register their kernels. Each family lives in
// its own files and exposes one fill function per ISA; registry.cpp builds the
// dispatch table from them. Not for use outside src/kernels and its tests.
#pragma once

#include <array>

#include "kernels/quant.h"

namespace sluice::kernels {

using KernelTable = std::array<TypeKernels, kGgmlTypeCount>;

// Fill the entries this family implements for `isa`. For Isa::Scalar every
// function of every type in the family must be set; for SIMD ISAs only the
// functions that have a SIMD version (the rest stay nullptr and fall back to
// scalar). Must not touch entries of other families.
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL, MXFP4:
void fill_legacy_kernels(KernelTable& table, Isa isa);
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS:
void fill_kquant_kernels(KernelTable& table, Isa isa);
// Multi-column dots (TypeKernels::vec_dot_cols) of the hot weight formats,
// each bit-identical to the vec_dot the family registered for the same ISA
// (dot_cols_*.cpp). Runs after the two above.
void fill_dot_cols_kernels(KernelTable& table, Isa isa);
// Isa::Amx: Q4_K's vec_dot and tile GEMM in the AMX rounding (quant.h,
// q4k_amx.cpp). Nothing for other ISAs.
void fill_amx_kernels(KernelTable& table, Isa isa);

}  // namespace sluice::kernels
