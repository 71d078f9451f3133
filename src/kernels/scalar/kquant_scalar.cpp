// Scalar reference K-quant kernels: dequantization and the dot product with a
// Q8_K activation row. These define the numerics the SIMD versions are tested
// against, so they favour clarity; integer products are summed exactly per
// super-block and only the per-block scale multiply is done in float.
#include <cstdint>

#include "kernels/blocks_kquant.h"
#include "kernels/kquant_kernels.h"
#include "kernels/tables.h"
#include "util/fp16.h"

namespace sluice::kernels::kquant {
namespace {

int64_t block_count(int64_t n) { return n / kQK_K; }

}  // namespace

// ----------------------------------------------------------------------------
// Dequantization
// ----------------------------------------------------------------------------

void dequantize_q2_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ2K*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ2K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int shift = 0; shift < 4; ++shift) {
        for (int part = 0; part < 2; ++part) {  // two sub-blocks of 16 per 32 bytes
          const uint8_t sc = b.scales[8 * half + 2 * shift + part];
          const float dl = d * static_cast<float>(sc & 0x0F);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l)
            *dst++ = dl * static_cast<float>((q[16 * part + l] >> (2 * shift)) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ3K*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ3K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    int8_t scales[16];
    unpack_q3k_scales(b.scales, scales);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int shift = 0; shift < 4; ++shift) {
        const int hbit = 4 * half + shift;  // which hmask bit holds these 32 elements' high bits
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(scales[8 * half + 2 * shift + part]);
          for (int l = 0; l < 16; ++l) {
            const int idx = 16 * part + l;
            const int low = (q[idx] >> (2 * shift)) & 3;
            const int high_set = (b.hmask[idx] >> hbit) & 1;
            *dst++ = dl * static_cast<float>(low - (high_set ? 0 : 4));
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4K*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ4K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    uint8_t sc[8], mn[8];
    unpack_k4_scales(b.scales, sc, mn);
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* q = b.qs + 32 * chunk;
      const float d1 = d * sc[2 * chunk], m1 = dmin * mn[2 * chunk];
      const float d2 = d * sc[2 * chunk + 1], m2 = dmin * mn[2 * chunk + 1];
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5K*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ5K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    const float dmin = fp16_to_fp32(b.dmin);
    uint8_t sc[8], mn[8];
    unpack_k4_scales(b.scales, sc, mn);
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* q = b.qs + 32 * chunk;
      const float d1 = d * sc[2 * chunk], m1 = dmin * mn[2 * chunk];
      const float d2 = d * sc[2 * chunk + 1], m2 = dmin * mn[2 * chunk + 1];
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] & 0x0F) | (((b.qh[l] >> (2 * chunk)) & 1) << 4);
        *dst++ = d1 * static_cast<float>(v) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        const int v = (q[l] >> 4) | (((b.qh[l] >> (2 * chunk + 1)) & 1) << 4);
        *dst++ = d2 * static_cast<float>(v) - m2;
      }
    }
  }
}

void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6K*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ6K& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* sc = b.scales + 8 * half;
      float* y = dst + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int g = l / 16;
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[g + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[g + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[g + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[g + 6]) * static_cast<float>(q4);
      }
    }
    dst += kQK_K;
  }
}

void dequantize_q8_k(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8K*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ8K& b = blocks[i];
    for (int j = 0; j < kQK_K; ++j) *dst++ = b.d * static_cast<float>(b.qs[j]);
  }
}

void dequantize_iq4_xs(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIq4Xs*>(src);
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockIq4Xs& b = blocks[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d * static_cast<float>(iq4xs_scale(b, ib));
      const uint8_t* q = b.qs + 16 * ib;
      for (int l = 0; l < 16; ++l) dst[l] = dl * static_cast<float>(kIq4nlValues[q[l] & 0x0F]);
      for (int l = 0; l < 16; ++l) dst[l + 16] = dl * static_cast<float>(kIq4nlValues[q[l] >> 4]);
      dst += 32;
    }
  }
}

// ----------------------------------------------------------------------------
// Dot products with Q8_K activations
// ----------------------------------------------------------------------------

float vec_dot_q2_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ2K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ2K& b = wb[i];
    const BlockQ8K& y = ab[i];
    // min term: sum_j min_j * (sum of activations in sub-block j)
    int32_t min_sum = 0;
    for (int j = 0; j < 16; ++j) min_sum += (b.scales[j] >> 4) * y.bsums[j];
    int32_t qsum = 0;
    const int8_t* q8 = y.qs;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int shift = 0; shift < 4; ++shift) {
        for (int part = 0; part < 2; ++part) {
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) dot += ((q[16 * part + l] >> (2 * shift)) & 3) * q8[l];
          qsum += (b.scales[8 * half + 2 * shift + part] & 0x0F) * dot;
          q8 += 16;
        }
      }
    }
    sum += y.d * (fp16_to_fp32(b.d) * static_cast<float>(qsum) - fp16_to_fp32(b.dmin) * static_cast<float>(min_sum));
  }
  return sum;
}

float vec_dot_q3_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ3K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ3K& b = wb[i];
    const BlockQ8K& y = ab[i];
    int8_t scales[16];
    unpack_q3k_scales(b.scales, scales);
    int32_t qsum = 0;
    const int8_t* q8 = y.qs;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = b.qs + 32 * half;
      for (int shift = 0; shift < 4; ++shift) {
        const int hbit = 4 * half + shift;
        for (int part = 0; part < 2; ++part) {
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) {
            const int idx = 16 * part + l;
            const int v = ((q[idx] >> (2 * shift)) & 3) - (((b.hmask[idx] >> hbit) & 1) ? 0 : 4);
            dot += v * q8[l];
          }
          qsum += scales[8 * half + 2 * shift + part] * dot;
          q8 += 16;
        }
      }
    }
    sum += fp16_to_fp32(b.d) * y.d * static_cast<float>(qsum);
  }
  return sum;
}

float vec_dot_q4_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ4K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ4K& b = wb[i];
    const BlockQ8K& y = ab[i];
    uint8_t sc[8], mn[8];
    unpack_k4_scales(b.scales, sc, mn);
    int32_t min_sum = 0;
    for (int j = 0; j < 8; ++j) min_sum += mn[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    int32_t qsum = 0;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* q = b.qs + 32 * chunk;
      const int8_t* q8 = y.qs + 64 * chunk;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += (q[l] & 0x0F) * q8[l];
        hi += (q[l] >> 4) * q8[l + 32];
      }
      qsum += sc[2 * chunk] * lo + sc[2 * chunk + 1] * hi;
    }
    sum += y.d * (fp16_to_fp32(b.d) * static_cast<float>(qsum) - fp16_to_fp32(b.dmin) * static_cast<float>(min_sum));
  }
  return sum;
}

float vec_dot_q5_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ5K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ5K& b = wb[i];
    const BlockQ8K& y = ab[i];
    uint8_t sc[8], mn[8];
    unpack_k4_scales(b.scales, sc, mn);
    int32_t min_sum = 0;
    for (int j = 0; j < 8; ++j) min_sum += mn[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
    int32_t qsum = 0;
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* q = b.qs + 32 * chunk;
      const int8_t* q8 = y.qs + 64 * chunk;
      int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        const int vlo = (q[l] & 0x0F) | (((b.qh[l] >> (2 * chunk)) & 1) << 4);
        const int vhi = (q[l] >> 4) | (((b.qh[l] >> (2 * chunk + 1)) & 1) << 4);
        lo += vlo * q8[l];
        hi += vhi * q8[l + 32];
      }
      qsum += sc[2 * chunk] * lo + sc[2 * chunk + 1] * hi;
    }
    sum += y.d * (fp16_to_fp32(b.d) * static_cast<float>(qsum) - fp16_to_fp32(b.dmin) * static_cast<float>(min_sum));
  }
  return sum;
}

float vec_dot_q6_k_scalar(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ6K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockQ6K& b = wb[i];
    const BlockQ8K& y = ab[i];
    int32_t sub[16] = {};  // integer dot of each 16-element sub-block
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* q8 = y.qs + 128 * half;
      int32_t* s = sub + 8 * half;
      for (int l = 0; l < 32; ++l) {
        const int g = l / 16;
        s[g + 0] += (((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32) * q8[l];
        s[g + 2] += (((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[l + 32];
        s[g + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[l + 64];
        s[g + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[l + 96];
      }
    }
    int32_t qsum = 0;
    for (int j = 0; j < 16; ++j) qsum += b.scales[j] * sub[j];
    sum += fp16_to_fp32(b.d) * y.d * static_cast<float>(qsum);
  }
  return sum;
}

float vec_dot_iq4_xs_scalar(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockIq4Xs*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < block_count(n); ++i) {
    const BlockIq4Xs& b = wb[i];
    const BlockQ8K& y = ab[i];
    int32_t qsum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* q = b.qs + 16 * ib;
      const int8_t* q8 = y.qs + 32 * ib;
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) {
        dot += kIq4nlValues[q[l] & 0x0F] * q8[l];
        dot += kIq4nlValues[q[l] >> 4] * q8[l + 16];
      }
      qsum += iq4xs_scale(b, ib) * dot;
    }
    sum += fp16_to_fp32(b.d) * y.d * static_cast<float>(qsum);
  }
  return sum;
}

}  // namespace sluice::kernels::kquant
