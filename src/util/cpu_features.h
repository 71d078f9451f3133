// Which SIMD instruction sets this CPU offers, detected once at run time.
#pragma once

namespace sluice {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  // AVX-VNNI: the VEX-encoded 256-bit vpdpbusd/vpdpwssd (Alder Lake, Sapphire
  // Rapids and later). Only set together with usable YMM state, like avx2.
  bool avxvnni = false;
  // AVX-512 F + BW + VL + VNNI, only set together with avx2 and with the OS
  // saving ZMM state (opmask, upper ZMM halves, ZMM16-31).
  bool avx512vnni = false;
  // AMX-TILE + AMX-INT8 (tdpbusd on 16x64-byte tiles; Sapphire Rapids and
  // later), only set with avx512vnni, with the OS saving tile state (XCR0
  // bits 17-18) and, on Linux, after the process was granted tile data
  // (arch_prctl ARCH_REQ_XCOMP_PERM, requested once here).
  bool amx_int8 = false;
  // AArch64: Advanced SIMD (always there on AArch64 Linux), the armv8.2-a
  // dot product (sdot/udot, HWCAP_ASIMDDP) and int8 matrix multiply (smmla,
  // HWCAP2_I8MM), read from the kernel's hwcaps (getauxval).
  bool neon = false;
  bool neon_dotprod = false;
  bool neon_i8mm = false;
};

// Thread-safe; computed on first call.
const CpuFeatures& cpu_features();

}  // namespace sluice
