#include "util/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__linux__) && defined(__aarch64__)
#include <sys/auxv.h>
#endif

namespace sluice {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Linux keeps AMX tile data off until a process asks for it (a tile
// instruction without the grant faults). The grant covers every thread of the
// process. False where the kernel refuses or the platform is not Linux.
bool request_tile_data() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// Reads the feature bits with CPUID (not __builtin_cpu_supports: clang 14 does
// not know "f16c" there). AVX/AVX2 also need the OS to save YMM state (XCR0).
CpuFeatures detect_x86() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  const bool fma = c & (1u << 12);
  const bool f16c = c & (1u << 29);
  bool ymm_enabled = false;
  bool zmm_enabled = false;
  bool tiles_enabled = false;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    ymm_enabled = (lo & 0x6u) == 0x6u;
    zmm_enabled = ymm_enabled && (lo & 0xe0u) == 0xe0u;  // opmask, ZMM_Hi256, Hi16_ZMM
    tiles_enabled = (lo & 0x60000u) == 0x60000u;           // XTILECFG, XTILEDATA
  }
  bool avx2 = false;
  bool avxvnni = false;
  bool avx512 = false;
  bool amx = false;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    avx2 = b & (1u << 5);
    amx = (d & (1u << 24)) && (d & (1u << 25));  // EDX: AMX-TILE, AMX-INT8
    // Leaf 7 subleaf 0: EBX bits 16 (F), 30 (BW), 31 (VL); ECX bit 11 (VNNI).
    avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (c & (1u << 11));
    // Leaf 7 subleaf 0 EAX = the highest valid subleaf; AVX-VNNI is subleaf 1 EAX bit 4.
    if (a >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      avxvnni = a & (1u << 4);
    }
  }
  f.avx2 = avx && avx2 && ymm_enabled;
  f.avxvnni = f.avx2 && avxvnni;
  f.avx512vnni = f.avx2 && avx512 && zmm_enabled;
  f.amx_int8 = f.avx512vnni && amx && tiles_enabled && request_tile_data();
  f.fma = fma && ymm_enabled;
  f.f16c = f16c && ymm_enabled;
  return f;
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
#if defined(__x86_64__) || defined(__i386__)
    return detect_x86();
#else
    CpuFeatures f;
#if defined(__aarch64__)
    f.neon = true;
#if defined(__linux__)
    f.neon_dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    f.neon_i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
#endif
    return f;
#endif
  }();
  return features;
}

}  // namespace sluice
