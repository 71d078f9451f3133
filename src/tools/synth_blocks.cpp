// Directly generated quantized blocks: random codes plus scales chosen so the
// dequantized values have the target standard deviation. This skips the float
// generation and the quantizer's scale search, which dominate synth time for
// multi-GB models; the value distribution is then a (scaled) discrete uniform
// rather than a normal, which is irrelevant for timing/streaming experiments.
//
// Per format (block layouts as in ggml; value = dequantized weight):
//  - Q8_0 {fp16 d; int8 q[32]}: q uniform in [-127,127] (std 73.6), d = std/73.6.
//  - Q4_0 {fp16 d; u8 qs[16]}: value = d*(q-8), q uniform in 0..15, so
//    E[(q-8)^2] = 21.5; d = ±std/sqrt(21.5) with a random sign per block so the
//    -0.5 mean offset of (q-8) cancels across blocks.
//  - Q4_K {fp16 d, dmin; u8 scales[12]; u8 qs[128]}: sub-block j value =
//    d*sc_j*q - dmin*m_j with q uniform in 0..15 (var 21.25). sc_j uniform in
//    [40,63], dmin = 7.5*d and m_j = sc_j, so each sub-block is centred on 0;
//    d = std / (sqrt(21.25) * rms(sc)).
//  - Q6_K {u8 ql[128], qh[64]; int8 scales[16]; fp16 d}: value =
//    d*scale*(q-32), q uniform in 0..63 (E[(q-32)^2] = 341.5); |scale| uniform
//    in [64,127] with random sign (cancels the -0.5 offset); d = std /
//    (sqrt(341.5) * rms(scale)).
//  - MXFP4 {u8 e; u8 qs[16]}: value = 2^(e-128) * L(q), L the doubled E2M1
//    levels (kernels/tables.h), q uniform in 0..15: symmetric (mean 0),
//    E[L^2] = 274/8 = 34.25. The scale is a power of two, so per block e is
//    e_lo or e_lo + 1 (s_lo = 2^(e_lo-128) <= std/sqrt(34.25) < 2 s_lo) with
//    the probability p = (t^2 - s_lo^2) / (3 s_lo^2) of e_lo + 1 that makes
//    the mean square over blocks exactly t^2, t = std/sqrt(34.25).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tools/synth_random.h"
#include "util/error.h"
#include "util/fp16.h"

namespace sluice::tools {
namespace {

void fill_random_bytes(Rng& rng, uint8_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, 8);
  }
  if (i < n) {
    const uint64_t r = rng.next();
    std::memcpy(dst + i, &r, n - i);
  }
}

void put_fp16(uint8_t* dst, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(dst, &h, 2);
}

void q8_0_block(Rng& rng, float std, uint8_t* b) {
  put_fp16(b, std / 73.6116f);
  for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(rng.uniform_int(-127, 127)));
}

void q4_0_block(Rng& rng, float std, uint8_t* b) {
  const float d = std / std::sqrt(21.5f);
  put_fp16(b, (rng.next() & 1) ? d : -d);
  fill_random_bytes(rng, b + 2, 16);
}

// Packs eight 6-bit scales and mins the way ggml's Q4_K reads them back.
void pack_q4k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

void q4_k_block(Rng& rng, float std, uint8_t* b) {
  uint8_t sc[8];
  float sum_sq = 0;
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(rng.uniform_int(40, 63));
    sum_sq += static_cast<float>(sc[j]) * sc[j];
  }
  const float d = std / (std::sqrt(21.25f) * std::sqrt(sum_sq / 8));
  put_fp16(b, d);
  put_fp16(b + 2, 7.5f * d);
  pack_q4k_scales(sc, sc, b + 4);
  fill_random_bytes(rng, b + 16, 128);
}

void q6_k_block(Rng& rng, float std, uint8_t* b) {
  fill_random_bytes(rng, b, 128 + 64);
  float sum_sq = 0;
  for (int j = 0; j < 16; ++j) {
    const int mag = rng.uniform_int(64, 127);
    sum_sq += static_cast<float>(mag * mag);
    b[192 + j] = static_cast<uint8_t>(static_cast<int8_t>((rng.next() & 1) ? mag : -mag));
  }
  put_fp16(b + 208, std / (std::sqrt(341.5f) * std::sqrt(sum_sq / 16)));
}

void mxfp4_block(Rng& rng, float std, uint8_t* b) {
  const float t = std / std::sqrt(34.25f);
  const int e_lo = static_cast<int>(std::floor(std::log2(t)));
  const float s_lo = std::ldexp(1.0f, e_lo);
  const float p = (t * t - s_lo * s_lo) / (3 * s_lo * s_lo);
  const int e = 128 + e_lo + (rng.uniform() < p ? 1 : 0);
  b[0] = static_cast<uint8_t>(std::clamp(e, 2, 254));  // a normal float scale, never the E8M0 NaN
  fill_random_bytes(rng, b + 1, 16);
}

}  // namespace

bool direct_block_supported(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_K || t == GgmlType::Q6_K ||
         t == GgmlType::MXFP4;
}

void generate_direct_row(GgmlType t, Rng& rng, float std, void* dst, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(t);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t blocks = n / info.block_elems;
  for (int64_t i = 0; i < blocks; ++i, out += info.block_bytes) {
    switch (t) {
      case GgmlType::Q8_0: q8_0_block(rng, std, out); break;
      case GgmlType::Q4_0: q4_0_block(rng, std, out); break;
      case GgmlType::Q4_K: q4_k_block(rng, std, out); break;
      case GgmlType::Q6_K: q6_k_block(rng, std, out); break;
      case GgmlType::MXFP4: mxfp4_block(rng, std, out); break;
      default: throw Error("synth: no direct block generator for type " + std::string(info.name));
    }
  }
}

}  // namespace sluice::tools
