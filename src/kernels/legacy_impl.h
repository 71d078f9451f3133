// Internal to the legacy-format kernels (F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q8_1, IQ4_NL, MXFP4): the per-ISA fill functions that
// the ISA fill functions (kernel_table.h) call.
//
// Activation quantizers (Q8_0, Q8_1) follow what llama.cpp's CPU backend does
// on an AVX2 machine (the one that produced /work/shared/golden): per block
// amax = max|x|, d = amax / 127 (stored as fp16), q = round-half-to-even(x *
// (127 / amax)). This differs from ggml's quantize_row_q8_0_ref (which rounds
// half away from zero and multiplies by 1/d) only on rare exact ties and
// 1-ulp differences of the multiplier; we match the path the reference logits
// went through. Every ISA's quantizer is bit-identical to the scalar one, and
// never produces -128, which the SIMD dot products rely on (they use the
// sign-transfer trick, exact for activation values in [-127, 127]).
#pragma once

#include "kernels/kernel_table.h"

namespace sluice::kernels {

void fill_legacy_scalar(KernelTable& table);
// Only on x86-64 builds; sets entries that have an AVX2+FMA+F16C version.
void fill_legacy_avx2(KernelTable& table);
// Parts of the above, one per file: scalar quantizers (legacy_scalar_quantize.cpp)
// and AVX2 dot products (legacy_avx2_dot.cpp).
void legacy_scalar_quantizers(KernelTable& table);
void fill_legacy_avx2_dot(KernelTable& table);
// Only on x86-64 builds: AVX-VNNI dot products (legacy_vnni_dot.cpp), each
// bit-identical to the AVX2 one of its type.
void fill_legacy_vnni_dot(KernelTable& table);
// Only on x86-64 builds: AVX-512 VNNI kernels of the symmetric formats (Q4_0,
// Q5_0, Q8_0, IQ4_NL, MXFP4) in this set's block-sum rounding (quant.h):
// vec_dot and vec_dot_cols (legacy_avx512_dot.cpp), and the packed layout of
// the same formats, bit-identical to those (legacy_packed_avx512.cpp).
void fill_legacy_avx512_dot(KernelTable& table);
void fill_legacy_packed_avx512(KernelTable& table);

// Note on Q4_1 / Q5_1: vec_dot uses the activation's stored s = fp16(d * sum q)
// for the offset term (as llama.cpp does), so it equals the exact dot of the
// dequantized rows plus sum_blocks m * (s - fp16(d) * sum q), a relative
// difference of order 2^-11 on that term.

}  // namespace sluice::kernels
