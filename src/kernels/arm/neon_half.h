// Internal to the NEON kernels: an fp16 block scale as float through the
// AArch64 conversion instruction (fcvt), exact like util/fp16.h's
// fp16_to_fp32, which takes a dozen instructions and a branch per call.
#pragma once

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

namespace sluice::kernels {

inline float half_to_float(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

}  // namespace sluice::kernels

#endif
