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
  bool neon = false;
};

// Thread-safe; computed on first call.
const CpuFeatures& cpu_features();

}  // namespace sluice
