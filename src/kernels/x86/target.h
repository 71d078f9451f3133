// The x86 function target attributes, in one place. Kernels carry them per
// function, so the project needs no -mavx2 (or -march) flag and one binary
// runs everywhere; a function with one of these attributes may only run after
// the registry (kernels/registry.cpp) has seen the matching CpuFeatures.
#pragma once

#if defined(__x86_64__)

// AVX2 + FMA + F16C (Isa::Avx2; Haswell and later).
#define SLUICE_AVX2 __attribute__((target("avx2,fma,f16c")))
// AVX-VNNI (vpdpbusd / vpdpwssd, VEX-encoded, 256-bit) on top of AVX2+FMA+F16C
// (Isa::AvxVnni; CpuFeatures::avxvnni).
#define SLUICE_AVXVNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
// AVX-512 F/BW/VL/VNNI (EVEX: 32 vector registers, 512-bit integer
// multiply-adds) on top of AVX2+FMA+F16C (Isa::Avx512Vnni;
// CpuFeatures::avx512vnni). Does not imply AVX-VNNI (Ice Lake has this
// without it).
#define SLUICE_AVX512VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
// AMX-TILE + AMX-INT8 on top of the above (Isa::Amx; CpuFeatures::amx_int8).
#define SLUICE_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")))

#endif  // __x86_64__
