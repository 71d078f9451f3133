// Internal: how kernels are registered. Each ISA has ONE fill function (in its
// folder: scalar/, x86/, arm/) that puts everything it has (quant kernels per
// type, element-wise ops) into an IsaKernels; registry.cpp calls it when the
// CPU runs that ISA and overlays the ISAs in Isa order. A new ISA is one fill
// function plus one case in registry.cpp's isa_entry(). Within an ISA, the
// format families (legacy, K-quant, multi-column dots, AMX, ops) keep their
// own registration functions, declared below. Not for use outside src/kernels
// and its tests.
#pragma once

#include <array>

#include "kernels/ops.h"
#include "kernels/quant.h"

namespace sluice::kernels {

using KernelTable = std::array<TypeKernels, kGgmlTypeCount>;

// Everything one ISA provides. For Isa::Scalar every function of every
// supported type and every op is set; SIMD ISAs set only what they have (the
// rest stays nullptr and a lower ISA's entry serves). A vec_dot_cols or tile
// GEMM must be bit-identical to the vec_dot the same ISA sets for that type
// (quant.h); the registry only pairs functions of one ISA.
struct IsaKernels {
  KernelTable quant{};
  OpsKernels ops{};
};

// The per-ISA fill functions. Each is defined on every build; on a build for
// another architecture it sets nothing (and cpu_features() reports no such ISA).
void fill_isa_scalar(IsaKernels& k);       // scalar/isa_scalar.cpp
void fill_isa_avx2(IsaKernels& k);         // x86/isa_x86.cpp
void fill_isa_avx_vnni(IsaKernels& k);     // x86/isa_x86.cpp
void fill_isa_avx512_vnni(IsaKernels& k);  // x86/isa_x86.cpp
void fill_isa_amx(IsaKernels& k);          // x86/isa_x86.cpp
void fill_isa_neon(IsaKernels& k);         // arm/isa_neon.cpp
void fill_isa_neon_i8mm(IsaKernels& k);    // arm/isa_neon.cpp

// Bytes of one super-block of prepared activations (prepare_tile), the same
// for every tile GEMM so that tile_prepared_lines() serves them all: AMX's
// layout (x86/q4k_amx.cpp) takes exactly this, NEON i8mm's (arm/q4k_i8mm.cpp)
// no more.
inline constexpr size_t kTilePreparedBlockBytes = 4416;

// ---- Family registration, called by the fill functions above ----
// Legacy formats: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL,
// MXFP4 (legacy_impl.h). K-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS
// (kquant_kernels.cpp):
void fill_kquant_scalar(KernelTable& table);
// Element-wise ops (ops.h):
void fill_ops_scalar(OpsKernels& k);  // scalar/ops_scalar.cpp
// Gated DeltaNet conv and state update (kernels/deltanet.h):
void fill_deltanet_scalar(OpsKernels& k);  // scalar/deltanet_scalar.cpp

#if defined(__x86_64__)
void fill_kquant_avx2(KernelTable& table);
void fill_kquant_vnni(KernelTable& table);
void fill_kquant_avx512(KernelTable& table);
// Multi-column dots (TypeKernels::vec_dot_cols) of the hot weight formats,
// each bit-identical to its ISA's vec_dot (x86/dot_cols_*.cpp). No scalar
// version: dot_cols() loops over the scalar vec_dot, which is what one would
// compute.
void fill_dot_cols_avx2(KernelTable& table);
void fill_dot_cols_vnni(KernelTable& table);
void fill_dot_cols_avx512(KernelTable& table);
// Packed (row-interleaved) Q4_K, Q5_K, Q6_K (TypeKernels::pack_rows /
// packed_dot), bit-identical to the AVX-512 VNNI vec_dot
// (x86/kquant_packed_avx512.cpp).
void fill_kquant_packed_avx512(KernelTable& table);
// Q4_K's vec_dot and tile GEMM in the AMX rounding (quant.h, x86/q4k_amx.cpp).
void fill_amx_q4k(KernelTable& table);
void fill_ops_avx2(OpsKernels& k);  // x86/ops_avx2.cpp
void fill_deltanet_avx2(OpsKernels& k);  // x86/deltanet_avx2.cpp
#endif
#if defined(__aarch64__)
void fill_deltanet_neon(OpsKernels& k);  // arm/deltanet_neon.cpp
// Q4_K's vec_dot and tile GEMM in the AMX rounding (quant.h, arm/q4k_i8mm.cpp).
void fill_i8mm_q4k(KernelTable& table);
#endif

}  // namespace sluice::kernels
