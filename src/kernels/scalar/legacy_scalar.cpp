// Scalar reference kernels of the legacy formats: dequantize and vec_dot.
// These define the results; SIMD versions are tested against them. They are
// written for clarity: each block is first decoded to its integer levels, then
// scaled (dequantize) or multiplied with the activation's levels (vec_dot).
#include <cstddef>

#include "kernels/blocks_legacy.h"
#include "kernels/legacy_impl.h"
#include "kernels/tables.h"

namespace sluice::kernels {
namespace {

// Per-format traits: decode(block, q) writes the 32 integer levels; scale()
// and offset() give x = scale * q + offset. Symmetric formats have no offset
// and take Q8_0 activations; offset formats take Q8_1.
struct Q4_0T {
  using Block = BlockQ4_0;
  static constexpr bool kHasOffset = false;
  static void decode(const Block& b, int q[32]) {
    for (int j = 0; j < 16; ++j) {
      q[j] = (b.qs[j] & 0x0f) - 8;
      q[j + 16] = (b.qs[j] >> 4) - 8;
    }
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block&) { return 0.0f; }
};
struct Q4_1T {
  using Block = BlockQ4_1;
  static constexpr bool kHasOffset = true;
  static void decode(const Block& b, int q[32]) {
    for (int j = 0; j < 16; ++j) {
      q[j] = b.qs[j] & 0x0f;
      q[j + 16] = b.qs[j] >> 4;
    }
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block& b) { return fp16_to_fp32(b.m); }
};
struct Q5_0T {
  using Block = BlockQ5_0;
  static constexpr bool kHasOffset = false;
  static void decode(const Block& b, int q[32]) {
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < 16; ++j) {
      q[j] = ((b.qs[j] & 0x0f) | static_cast<int>((qh >> j) & 1u) << 4) - 16;
      q[j + 16] = ((b.qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4) - 16;
    }
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block&) { return 0.0f; }
};
struct Q5_1T {
  using Block = BlockQ5_1;
  static constexpr bool kHasOffset = true;
  static void decode(const Block& b, int q[32]) {
    const uint32_t qh = load_qh(b.qh);
    for (int j = 0; j < 16; ++j) {
      q[j] = (b.qs[j] & 0x0f) | static_cast<int>((qh >> j) & 1u) << 4;
      q[j + 16] = (b.qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    }
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block& b) { return fp16_to_fp32(b.m); }
};
struct Q8_0T {
  using Block = BlockQ8_0;
  static constexpr bool kHasOffset = false;
  static void decode(const Block& b, int q[32]) {
    for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block&) { return 0.0f; }
};
struct Q8_1T {  // activation-only: dequantize exists for tests and tools
  using Block = BlockQ8_1;
  static constexpr bool kHasOffset = false;
  static void decode(const Block& b, int q[32]) {
    for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block&) { return 0.0f; }
};
struct Iq4NlT {
  using Block = BlockIq4Nl;
  static constexpr bool kHasOffset = false;
  static void decode(const Block& b, int q[32]) {
    for (int j = 0; j < 16; ++j) {
      q[j] = kIq4nlValues[b.qs[j] & 0x0f];
      q[j + 16] = kIq4nlValues[b.qs[j] >> 4];
    }
  }
  static float scale(const Block& b) { return fp16_to_fp32(b.d); }
  static float offset(const Block&) { return 0.0f; }
};
struct Mxfp4T {
  using Block = BlockMxfp4;
  static constexpr bool kHasOffset = false;
  static void decode(const Block& b, int q[32]) {
    for (int j = 0; j < 16; ++j) {
      q[j] = kMxfp4Values[b.qs[j] & 0x0f];
      q[j + 16] = kMxfp4Values[b.qs[j] >> 4];
    }
  }
  static float scale(const Block& b) { return e8m0_to_fp32_half(b.e); }
  static float offset(const Block&) { return 0.0f; }
};

template <class T>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const typename T::Block*>(src);
  int q[32];
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const auto& b = blocks[i];
    T::decode(b, q);
    const float d = T::scale(b);
    const float m = T::offset(b);
    float* y = dst + i * kLegacyBlock;
    if constexpr (T::kHasOffset) {
      for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d + m;
    } else {
      for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d;
    }
  }
}

// sum over blocks of d_w * d_a * sum_j(q_w q_a) [+ m_w * s_a]: the integer part
// is exact, the per-block float terms are accumulated in block order.
template <class T>
float vec_dot_blocks(int64_t n, const void* w, const void* act) {
  const auto* wb = static_cast<const typename T::Block*>(w);
  int q[32];
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    T::decode(wb[i], q);
    int sumi = 0;
    if constexpr (T::kHasOffset) {
      const auto& a = static_cast<const BlockQ8_1*>(act)[i];
      for (int j = 0; j < 32; ++j) sumi += q[j] * a.qs[j];
      sum += (T::scale(wb[i]) * fp16_to_fp32(a.d)) * static_cast<float>(sumi) +
             T::offset(wb[i]) * fp16_to_fp32(a.s);
    } else {
      const auto& a = static_cast<const BlockQ8_0*>(act)[i];
      for (int j = 0; j < 32; ++j) sumi += q[j] * a.qs[j];
      sum += static_cast<float>(sumi) * (T::scale(wb[i]) * fp16_to_fp32(a.d));
    }
  }
  return sum;
}

// Plain types: accumulate in double so the reference is accurate to ~1 ulp.
template <class Elem, float (*ToF32)(Elem)>
float vec_dot_plain(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const Elem*>(w);
  const auto* y = static_cast<const Elem*>(act);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(ToF32(x[i])) * static_cast<double>(ToF32(y[i]));
  return static_cast<float>(sum);
}
template <class Elem, float (*ToF32)(Elem)>
void dequantize_plain(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const Elem*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = ToF32(x[i]);
}

float f32_identity(float x) { return x; }

template <class T>
void set_blocks(KernelTable& table, GgmlType t, GgmlType dot_type) {
  TypeKernels& k = table[static_cast<uint32_t>(t)];
  k.dequantize = &dequantize_blocks<T>;
  k.vec_dot = &vec_dot_blocks<T>;
  k.vec_dot_type = dot_type;
}

}  // namespace

void fill_legacy_scalar(KernelTable& table) {
  auto& f32 = table[static_cast<uint32_t>(GgmlType::F32)];
  f32.dequantize = &dequantize_plain<float, f32_identity>;
  f32.vec_dot = &vec_dot_plain<float, f32_identity>;
  f32.vec_dot_type = GgmlType::F32;
  auto& f16 = table[static_cast<uint32_t>(GgmlType::F16)];
  f16.dequantize = &dequantize_plain<uint16_t, fp16_to_fp32>;
  f16.vec_dot = &vec_dot_plain<uint16_t, fp16_to_fp32>;
  f16.vec_dot_type = GgmlType::F16;
  auto& bf16 = table[static_cast<uint32_t>(GgmlType::BF16)];
  bf16.dequantize = &dequantize_plain<uint16_t, bf16_to_fp32>;
  bf16.vec_dot = &vec_dot_plain<uint16_t, bf16_to_fp32>;
  bf16.vec_dot_type = GgmlType::BF16;

  set_blocks<Q4_0T>(table, GgmlType::Q4_0, GgmlType::Q8_0);
  set_blocks<Q4_1T>(table, GgmlType::Q4_1, GgmlType::Q8_1);
  set_blocks<Q5_0T>(table, GgmlType::Q5_0, GgmlType::Q8_0);
  set_blocks<Q5_1T>(table, GgmlType::Q5_1, GgmlType::Q8_1);
  set_blocks<Q8_0T>(table, GgmlType::Q8_0, GgmlType::Q8_0);
  set_blocks<Iq4NlT>(table, GgmlType::IQ4_NL, GgmlType::Q8_0);
  set_blocks<Mxfp4T>(table, GgmlType::MXFP4, GgmlType::Q8_0);
  // Q8_1 is an activation format: dequantize + quantize, no vec_dot.
  auto& q8_1 = table[static_cast<uint32_t>(GgmlType::Q8_1)];
  q8_1.dequantize = &dequantize_blocks<Q8_1T>;
  q8_1.vec_dot_type = GgmlType::Q8_1;

  legacy_scalar_quantizers(table);
}

}  // namespace sluice::kernels
