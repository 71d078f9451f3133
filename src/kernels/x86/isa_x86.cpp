// The x86 ISAs' fill functions (kernel_table.h). Each later ISA only adds what
// it does differently; the registry overlays them on the lower ones.
#include "kernels/kernel_table.h"
#include "kernels/legacy_impl.h"

namespace sluice::kernels {

#if defined(__x86_64__)

void fill_isa_avx2(IsaKernels& k) {
  fill_legacy_avx2(k.quant);
  fill_kquant_avx2(k.quant);
  fill_dot_cols_avx2(k.quant);
  fill_ops_avx2(k.ops);
  fill_deltanet_avx2(k.ops);
}

// Integer dot products only; no ops (they have no integer dots: AVX2 serves).
void fill_isa_avx_vnni(IsaKernels& k) {
  fill_legacy_vnni_dot(k.quant);
  fill_kquant_vnni(k.quant);
  fill_dot_cols_vnni(k.quant);
}

// The K-quant prefill dots, and the symmetric legacy formats' dots with their
// packed layout (vec_dot, vec_dot_cols, pack_rows and packed_dot all from this
// ISA: the registry takes them together). Q4_1/Q5_1 keep their AVX-VNNI (or
// AVX2) entries.
void fill_isa_avx512_vnni(IsaKernels& k) {
  fill_kquant_avx512(k.quant);
  fill_dot_cols_avx512(k.quant);
  fill_kquant_packed_avx512(k.quant);
  fill_legacy_avx512_dot(k.quant);
  fill_legacy_packed_avx512(k.quant);
}

// Q4_K only. No multi-column dot: the tile GEMM instead, and dot_cols() loops
// over its vec_dot for the odd call that has no tile.
void fill_isa_amx(IsaKernels& k) { fill_amx_q4k(k.quant); }

#else  // not an x86-64 build: the slots stay empty

void fill_isa_avx2(IsaKernels&) {}
void fill_isa_avx_vnni(IsaKernels&) {}
void fill_isa_avx512_vnni(IsaKernels&) {}
void fill_isa_amx(IsaKernels&) {}

#endif

}  // namespace sluice::kernels
