// Dispatch of the legacy-format kernels per ISA (see kernel_table.h).
#include "kernels/legacy_impl.h"

namespace sluice::kernels {

void fill_legacy_kernels(KernelTable& table, Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      fill_legacy_scalar(table);
      break;
    case Isa::Avx2:
#if defined(__x86_64__)
      fill_legacy_avx2(table);
#endif
      break;
    case Isa::Neon:
      // Slot for NEON kernels (legacy_neon.cpp: vdotq_s32 for the 8-bit dot
      // products, vqtbl1q_s8 for the IQ4_NL / MXFP4 lookups). None yet, so
      // every type falls back to scalar on ARM.
      break;
    case Isa::AvxVnni:
#if defined(__x86_64__)
      fill_legacy_vnni_dot(table);
#endif
      break;
    case Isa::Avx512Vnni:
    case Isa::Amx:
      // None: the legacy formats keep their AVX-VNNI (or AVX2) entries.
      break;
  }
}

}  // namespace sluice::kernels
