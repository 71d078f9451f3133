#include "util/cpu_features.h"

namespace sluice {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
#elif defined(__aarch64__)
    f.neon = true;
#endif
    return f;
  }();
  return features;
}

}  // namespace sluice
