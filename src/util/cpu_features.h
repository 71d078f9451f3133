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
  bool neon = false;
};

// Thread-safe; computed on first call.
const CpuFeatures& cpu_features();

}  // namespace sluice
