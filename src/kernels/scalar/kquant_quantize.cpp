// K-quant quantization: float rows -> blocks, following ggml's reference
// ("_ref", no importance matrix) algorithms so that the files we synthesize
// and the activations we quantize match what llama.cpp would produce.
//
// Rounding: all "round to nearest" steps use nearest_int (the float
// magic-number trick: ties to even, exact for |x| < 2^22), as ggml does;
// Q8_K must be bit-exact because logits are compared with llama.cpp's.
// Inputs are assumed finite; non-finite inputs give unspecified (but memory-
// safe) block contents.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/blocks_kquant.h"
#include "kernels/kquant_kernels.h"
#include "kernels/tables.h"
#include "util/fp16.h"

namespace sluice::kernels::kquant {
namespace {

// Below this a group counts as all-zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

int nearest_int(float x) {
  const float shifted = x + 12582912.0f;  // 1.5 * 2^23: the integer lands in the low mantissa bits
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

// Affine fit x ~= scale * L - min_out (L in 0..nmax), searching nstep+1
// candidate inverse scales around nmax/(max-min) and keeping the one with the
// smallest weighted error (squared, or absolute when use_mad). Returns scale,
// stores the (non-negative) min in *min_out.
float fit_scale_min(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* min_out,
                    uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = x[i] < min ? x[i] : min;
    max = x[i] > max ? x[i] : max;
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::memset(L, 0, static_cast<size_t>(n));
    *min_out = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    float diff = scale * l + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *min_out = -min;
  return scale;
}

// Symmetric fit x ~= scale * (L - nmax), L - nmax in [-nmax, nmax-1], weighted by
// x^2, trying 18 inverse scales around -nmax/max (ggml's make_qx_quants, rmse_type 1).
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) { amax = ax; max = x[i]; }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's sub-block scale: symmetric fit with nmax 4 refined by coordinate
// descent on the x^2-weighted error (ggml's make_q3_quants with do_rmse).
float fit_q3_scale(int n, const float* x, int8_t* L) {
  constexpr int nmax = 4;
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) { amax = ax; max = x[i]; }
  }
  if (amax < kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 2-bit values L[0..255] (each < 4) the Q2_K/Q3_K way.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q4_K/Q5_K share everything except the quant width and packing.
template <int kNmax>
void quantize_k4_style(const float* x, uint16_t& d_out, uint16_t& dmin_out, uint8_t packed_scales[kKScaleBytes],
                       uint8_t L[kQK_K], float rmin, int nstep) {
  uint8_t Laux[32];
  float weights[32];
  float mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, kNmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(packed_scales, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    // ggml stores these through uint8_t before clamping; mimic the wrap.
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed_scales[j] = ls;
      packed_scales[j + 4] = lm;
    } else {
      packed_scales[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
      packed_scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed_scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  d_out = fp32_to_fp16(max_scale / 63.f);
  dmin_out = fp32_to_fp16(max_min / 63.f);
  uint8_t sc[8], mn[8];
  unpack_k4_scales(packed_scales, sc, mn);
  const float d_all = fp16_to_fp32(d_out), dmin_all = fp16_to_fp32(dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float d = d_all * sc[j];
    if (d == 0) continue;
    const float dm = dmin_all * mn[j];
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, kNmax));
  }
}

// IQ4_XS: index of the level of kIq4nlValues nearest to x (ties to the upper).
int nearest_iq4_level(float x) {
  const int8_t* v = kIq4nlValues;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) hi = mid; else lo = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

}  // namespace

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ8K& y = blocks[i];
    float max = 0, amax = 0;  // max: the signed value of largest magnitude (first one wins)
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(src[j]);
      if (ax > amax) { amax = ax; max = src[j]; }
    }
    if (amax == 0) {
      y.d = 0;
      std::memset(y.qs, 0, sizeof y.qs);
      std::memset(y.bsums, 0, sizeof y.bsums);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) y.qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[j])));
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y.qs[16 * j + l];
      y.bsums[j] = static_cast<int16_t>(sum);
    }
    y.d = 1 / iscale;
  }
}

void quantize_q2_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ2K*>(dst);
  constexpr float kQ4Scale = 15.f;
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ2K& y = blocks[i];
    uint8_t L[kQK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = fit_scale_min(16, 3, src + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y.d = fp32_to_fp16(max_scale / kQ4Scale);
    } else {
      std::memset(y.scales, 0, sizeof y.scales);
      y.d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j) y.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y.dmin = fp32_to_fp16(max_min / kQ4Scale);
    } else {
      y.dmin = fp32_to_fp16(0.f);
    }
    const float d_all = fp16_to_fp32(y.d), dmin_all = fp16_to_fp32(y.dmin);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * (y.scales[j] & 0x0F);
      if (d == 0) continue;
      const float dm = dmin_all * (y.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<uint8_t>(std::clamp(nearest_int((src[16 * j + ii] + dm) / d), 0, 3));
    }
    pack_2bit(L, y.qs);
  }
}

void quantize_q3_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ3K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ3K& y = blocks[i];
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_q3_scale(16, src + 16 * j, L + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) { amax = a; max_scale = scales[j]; }
    }
    std::memset(y.scales, 0, sizeof y.scales);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = std::clamp(static_cast<int>(static_cast<int8_t>(nearest_int(iscale * scales[j]))), -32, 31) + 32;
        if (j < 8) y.scales[j] = static_cast<uint8_t>(l & 0x0F);
        else y.scales[j - 8] |= static_cast<uint8_t>((l & 0x0F) << 4);
        y.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y.d = fp32_to_fp16(1 / iscale);
    } else {
      y.d = fp32_to_fp16(0.f);
    }
    int8_t sc[16];
    unpack_q3k_scales(y.scales, sc);
    const float d_all = fp16_to_fp32(y.d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * sc[j];
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(src[16 * j + ii] / d), -4, 3) + 4);
    }
    // High bit of element j goes to hmask[j % 32], bit j / 32.
    std::memset(y.hmask, 0, sizeof y.hmask);
    uint8_t low[kQK_K];
    for (int j = 0; j < kQK_K; ++j) {
      int l = L[j];
      if (l > 3) {
        y.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
        l -= 4;
      }
      low[j] = static_cast<uint8_t>(l);
    }
    pack_2bit(low, y.qs);
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ4K& y = blocks[i];
    uint8_t L[kQK_K];
    quantize_k4_style<15>(src, y.d, y.dmin, y.scales, L, -1.f, 20);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) y.qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ5K& y = blocks[i];
    uint8_t L[kQK_K];
    quantize_k4_style<31>(src, y.d, y.dmin, y.scales, L, -0.5f, 15);
    std::memset(y.qh, 0, sizeof y.qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        if (lo > 15) y.qh[l] |= static_cast<uint8_t>(1u << (2 * c));
        if (hi > 15) y.qh[l] |= static_cast<uint8_t>(2u << (2 * c));
        y.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      }
    }
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ6K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockQ6K& y = blocks[i];
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = fit_symmetric_scale(16, 32, src + 16 * ib, L + 16 * ib);
      const float a = std::fabs(scales[ib]);
      if (a > max_abs_scale) { max_abs_scale = a; max_scale = scales[ib]; }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y, 0, sizeof y);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) y.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    const float d_all = fp16_to_fp32(y.d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * y.scales[j];
      if (d == 0) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = static_cast<int8_t>(std::clamp(nearest_int(src[16 * j + ii] / d), -32, 31) + 32);
    }
    for (int half = 0; half < 2; ++half) {
      const int8_t* Lh = L + 128 * half;
      uint8_t* ql = y.ql + 64 * half;
      uint8_t* qh = y.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0x0F) | ((q3 & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0x0F) | ((q4 & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockIq4Xs*>(dst);
  constexpr int kNtry = 7;
  const int8_t* values = kIq4nlValues;
  for (int64_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    BlockIq4Xs& y = blocks[i];
    uint8_t L[kQK_K] = {};
    float scales[8];
    float weight[32];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const float* xb = src + 32 * ib;
      for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
      float amax = 0, max = 0;
      for (int j = 0; j < 32; ++j) {
        const float ax = std::fabs(xb[j]);
        if (ax > amax) { amax = ax; max = xb[j]; }
      }
      if (amax < kGroupMaxEps) {
        scales[ib] = 0;
        continue;
      }
      // Start from the scale that maps max onto the most negative level, then
      // try 2*kNtry+1 nearby inverse scales, keeping the best weighted fit.
      float d = kNtry > 0 ? -max / values[0] : max / values[0];
      float id = 1 / d;
      float sumqx = 0, sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        const int l = nearest_iq4_level(id * xb[j]);
        const float q = values[l];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
      }
      d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;  // sumq2 is 0 only if every x^2 underflows
      float best = d * sumqx;
      for (int itry = -kNtry; itry <= kNtry; ++itry) {
        id = (itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
          const float q = values[nearest_iq4_level(id * xb[j])];
          sumqx += weight[j] * q * xb[j];
          sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
          d = sumqx / sumq2;
          best = d * sumqx;
        }
      }
      scales[ib] = d;
      const float abs_d = std::fabs(d);
      if (abs_d > amax_scale) { amax_scale = abs_d; max_scale = d; }
    }
    std::memset(y.scales_l, 0, sizeof y.scales_l);
    y.scales_h = 0;
    const float d = -max_scale / 32;
    y.d = fp32_to_fp16(d);
    const float id = d != 0 ? 1 / d : 0.f;
    for (int ib = 0; ib < 8; ++ib) {
      const int l = std::clamp(nearest_int(id * scales[ib]), -32, 31);
      const float dl = d * l;
      const float idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(nearest_iq4_level(idl * src[32 * ib + j]));
      const int biased = l + 32;
      y.scales_l[ib / 2] |= static_cast<uint8_t>((biased & 0x0F) << (4 * (ib % 2)));
      y.scales_h |= static_cast<uint16_t>((biased >> 4) << (2 * ib));
    }
    for (int ib = 0; ib < 8; ++ib)
      for (int j = 0; j < 16; ++j)
        y.qs[16 * ib + j] = static_cast<uint8_t>(L[32 * ib + j] | (L[32 * ib + 16 + j] << 4));
  }
}

}  // namespace sluice::kernels::kquant
