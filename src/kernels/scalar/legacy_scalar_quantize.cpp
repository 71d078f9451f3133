// Scalar quantizers (float row -> blocks) of the legacy formats.
//
// Q4_0, Q4_1, Q5_0, Q5_1 and MXFP4 reproduce ggml's reference quantizers
// (quantize_row_*_ref), so files we write quantize like llama-quantize without
// an importance matrix. Q8_0 / Q8_1 follow llama.cpp's AVX2 activation path
// (see legacy_impl.h). IQ4_NL uses a scale search of our own (same idea as
// ggml's: try scales around max/-127 and keep the one with the best weighted
// least-squares fit), so its output is close to, not identical with, ggml's.
//
// Non-finite inputs give unspecified (but memory-safe, UB-free) codes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/blocks_legacy.h"
#include "kernels/legacy_impl.h"
#include "kernels/tables.h"

namespace sluice::kernels {
namespace {

// float -> int with truncation toward zero, saturated to [lo, hi] (the casts
// in ggml's quantizers, made UB-free for out-of-range and NaN inputs).
int trunc_clamped(float x, int lo, int hi) {
  if (!(x > static_cast<float>(lo))) return lo;  // also NaN
  if (x >= static_cast<float>(hi)) return hi;
  return static_cast<int>(x);
}

// Round half to even (the default rounding mode), saturated to [-128, 127].
int8_t round_even_i8(float x) {
  const long r = std::lrintf(x);  // NaN/overflow: unspecified value, not UB
  return static_cast<int8_t>(std::clamp(r, -128L, 127L));
}

// The value with the largest magnitude (first one on ties), sign kept.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kLegacyBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void block_min_max(const float* x, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < kLegacyBlock; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
}

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(src[i]);
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(src[i]);
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float* x = src + i * kLegacyBlock;
    const float d = signed_absmax(x) / -8.0f;  // the extreme value maps to level 0 exactly
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = trunc_clamped(x[j] * id + 8.5f, 0, 15);
      const int q1 = trunc_clamped(x[j + 16] * id + 8.5f, 0, 15);
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float* x = src + i * kLegacyBlock;
    float min, max;
    block_min_max(x, min, max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = trunc_clamped((x[j] - min) * id + 0.5f, 0, 15);
      const int q1 = trunc_clamped((x[j + 16] - min) * id + 0.5f, 0, 15);
      y[i].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// Splits 32 five-bit levels into low nibbles and the qh bit word.
template <class Block>
void pack_q5(const int q[32], Block& b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    b.qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  for (int k = 0; k < 4; ++k) b.qh[k] = static_cast<uint8_t>(qh >> (8 * k));
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float* x = src + i * kLegacyBlock;
    const float d = signed_absmax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = trunc_clamped(x[j] * id + 16.5f, 0, 31);
    pack_q5(q, y[i]);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float* x = src + i * kLegacyBlock;
    float min, max;
    block_min_max(x, min, max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = trunc_clamped((x[j] - min) * id + 0.5f, 0, 31);
    pack_q5(q, y[i]);
  }
}

// Shared by Q8_0 and Q8_1: returns d (unrounded) and writes the 32 levels.
float quantize_q8_levels(const float* x, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kLegacyBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int j = 0; j < kLegacyBlock; ++j) qs[j] = round_even_i8(x[j] * id);
  return d;
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    y[i].d = fp32_to_fp16(quantize_q8_levels(src + i * kLegacyBlock, y[i].qs));
  }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float d = quantize_q8_levels(src + i * kLegacyBlock, y[i].qs);
    int sum = 0;
    for (int j = 0; j < kLegacyBlock; ++j) sum += y[i].qs[j];
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));  // unrounded d, as llama.cpp
  }
}

// Index of the table level nearest to v (first one on ties), as ggml's
// best_index_mxfp4: a linear scan comparing |level * d - x|.
int nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Values[0] * d - x);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(kMxfp4Values[k] * d - x);
    if (err < best_err) {
      best = k;
      best_err = err;
    }
  }
  return best;
}

void quantize_mxfp4(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<BlockMxfp4*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float* x = src + i * kLegacyBlock;
    float amax = 0.0f;
    for (int j = 0; j < kLegacyBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    // Shared exponent: floor(log2(amax)) - 2, i.e. amax / 2^exp lands in [4, 8)
    // (E2M1's largest power of two is 4 = 2^2). Clamped to the E8M0 range.
    int e = 0;
    if (amax > 0.0f && std::isfinite(amax)) {
      e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254);
    }
    y[i].e = static_cast<uint8_t>(e);
    const float d = e8m0_to_fp32_half(y[i].e);
    for (int j = 0; j < 16; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(nearest_mxfp4(x[j], d) | nearest_mxfp4(x[j + 16], d) << 4);
    }
  }
}

// IQ4_NL level nearest to v (v in units of d), by binary search on the sorted table.
int nearest_iq4nl(float v) {
  if (v <= kIq4nlValues[0]) return 0;
  if (v >= kIq4nlValues[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < kIq4nlValues[mid] ? hi : lo) = mid;
  }
  return v - kIq4nlValues[lo] < kIq4nlValues[hi] - v ? lo : hi;
}

// For each candidate inverse scale, pick the nearest levels L, then the
// least-squares scale for those levels: d = sum(w x L) / sum(w L^2), with
// weights w = x^2 favouring the large values. Keep the candidate maximising
// sum(w x L)^2 / sum(w L^2) (equivalently minimising the weighted error).
void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
  constexpr int kTries = 7;
  auto* y = static_cast<BlockIq4Nl*>(dst);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    const float* x = src + i * kLegacyBlock;
    const float max = signed_absmax(x);
    uint8_t best_levels[32] = {};
    float best_d = 0.0f;
    if (max != 0.0f && std::isfinite(max)) {
      float best_score = -1.0f;
      for (int t = -kTries; t <= kTries; ++t) {
        const float id = static_cast<float>(kIq4nlValues[0] + t) / max;
        uint8_t levels[32];
        double sum_wxl = 0.0, sum_wll = 0.0;
        for (int j = 0; j < 32; ++j) {
          levels[j] = static_cast<uint8_t>(nearest_iq4nl(x[j] * id));
          const double w = static_cast<double>(x[j]) * x[j];
          const double l = kIq4nlValues[levels[j]];
          sum_wxl += w * x[j] * l;
          sum_wll += w * l * l;
        }
        if (sum_wll <= 0.0) continue;
        const double score = sum_wxl * sum_wxl / sum_wll;
        if (score > best_score) {
          best_score = static_cast<float>(score);
          best_d = static_cast<float>(sum_wxl / sum_wll);
          std::memcpy(best_levels, levels, sizeof(levels));
        }
      }
    }
    y[i].d = fp32_to_fp16(best_d);
    for (int j = 0; j < 16; ++j) {
      y[i].qs[j] = static_cast<uint8_t>(best_levels[j] | best_levels[j + 16] << 4);
    }
  }
}

void set_quantize(KernelTable& table, GgmlType t, QuantizeFn fn) {
  table[static_cast<uint32_t>(t)].quantize = fn;
}

}  // namespace

void legacy_scalar_quantizers(KernelTable& table) {
  set_quantize(table, GgmlType::F32, &quantize_f32);
  set_quantize(table, GgmlType::F16, &quantize_f16);
  set_quantize(table, GgmlType::BF16, &quantize_bf16);
  set_quantize(table, GgmlType::Q4_0, &quantize_q4_0);
  set_quantize(table, GgmlType::Q4_1, &quantize_q4_1);
  set_quantize(table, GgmlType::Q5_0, &quantize_q5_0);
  set_quantize(table, GgmlType::Q5_1, &quantize_q5_1);
  set_quantize(table, GgmlType::Q8_0, &quantize_q8_0);
  set_quantize(table, GgmlType::Q8_1, &quantize_q8_1);
  set_quantize(table, GgmlType::IQ4_NL, &quantize_iq4_nl);
  set_quantize(table, GgmlType::MXFP4, &quantize_mxfp4);
}

}  // namespace sluice::kernels
