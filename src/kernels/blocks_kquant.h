// Byte layouts of the K-quant super-block formats (ggml's block_q*_K and
// block_iq4_xs), plus the scale-unpacking helpers every implementation shares.
//
// All blocks cover QK_K = 256 weights. Layouts are fixed by the GGUF files we
// read: field order and sizes must match ggml exactly (checked by the
// static_asserts against util/ggml_type.cpp's block sizes). Half-precision
// fields are stored as raw IEEE binary16 bits (uint16_t). Blocks in a row are
// packed back to back with no padding, so every struct has alignment <= 4 and
// no internal padding; pointers into a row may be only 2-byte aligned, so SIMD
// code uses unaligned loads.
#pragma once

#include <cstdint>
#include <cstring>

namespace sluice::kernels {

inline constexpr int kQK_K = 256;
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales+mins (Q4_K, Q5_K) or 16x6-bit scales (Q3_K)

// Q2_K: 16 sub-blocks of 16. w = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q in 0..3.
// qs packs 4 quants per byte: byte l of each 32-byte half holds elements
// l, l+32, l+64, l+96 of that 128-half in bits 0-1, 2-3, 4-5, 6-7.
struct BlockQ2K {
  uint8_t scales[kQK_K / 16];  // low nibble: scale, high nibble: min
  uint8_t qs[kQK_K / 4];
  uint16_t d;                  // fp16 super-scale for scales
  uint16_t dmin;               // fp16 super-scale for mins
};
static_assert(sizeof(BlockQ2K) == 84);

// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (stored +32).
// w = d * (sc[j] - 32) * (q - (hbit ? 0 : 4)), q = 2 low bits (packed as Q2_K).
// hmask: bit b of hmask[l] is the high bit of element 32*b + l.
struct BlockQ3K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];  // see unpack_q3k_scales
  uint16_t d;
};
static_assert(sizeof(BlockQ3K) == 110);

// Q4_K: 8 sub-blocks of 32, 6-bit scale and min each (see unpack_k4_scales).
// w = d * sc[j] * q - dmin * m[j], q in 0..15. qs: 4 chunks of 32 bytes; chunk c
// holds elements 64c+l (low nibble) and 64c+32+l (high nibble).
struct BlockQ4K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4K) == 144);

// Q5_K: Q4_K plus a fifth bit: bit 2c (low nibble) / 2c+1 (high nibble) of
// qh[l] is bit 4 of the quant of chunk c, position l. q in 0..31.
struct BlockQ5K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5K) == 176);

// Q6_K: 16 sub-blocks of 16 with int8 scales. w = d * scales[j] * (q - 32), q in 0..63.
// Per 128-half: ql 64 bytes, qh 32 bytes. For l in 0..31 the four quants
// l, l+32, l+64, l+96 are ql[l]&15, ql[l+32]&15, ql[l]>>4, ql[l+32]>>4 with
// high bits (qh[l] >> 0, 2, 4, 6) & 3.
struct BlockQ6K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6K) == 210);

// Q8_K: the activation format for all K-quant dot products. x = d * qs[i].
// bsums[j] = sum of qs[16j .. 16j+15] (lets kernels apply per-sub-block
// offsets/mins without touching qs). qs values lie in [-127, 127].
struct BlockQ8K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8K) == 292);

// IQ4_XS: 8 sub-blocks of 32, 6-bit signed scales (stored +32) split into
// scales_l (4 low bits, two per byte) and scales_h (2 high bits each).
// w = d * (ls - 32) * kIq4nlValues[q]. qs: 16 bytes per sub-block; byte l holds
// element l (low nibble) and l+16 (high nibble).
struct BlockIq4Xs {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIq4Xs) == 136);

// --- scale unpacking (format definitions; shared by scalar and SIMD code) ---

// Q4_K / Q5_K: 12 bytes -> 8 six-bit scales and 8 six-bit mins.
// Sub-blocks 0..3: scale = b[j] & 63, min = b[j+4] & 63.
// Sub-blocks 4..7: low 4 bits from b[j+4] (scale: low nibble, min: high nibble),
// high 2 bits from the top bits of b[j-4] (scale) and b[j] (min).
inline void unpack_k4_scales(const uint8_t packed[kKScaleBytes], uint8_t scales[8], uint8_t mins[8]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = packed[j] & 63;
    mins[j] = packed[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>((packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4));
    mins[j] = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// Q3_K: 12 bytes -> 16 signed scales in -32..31. Scale j has its low nibble in
// byte j (j < 8, low nibble) or byte j-8 (high nibble), and its high 2 bits in
// byte 8 + j%4 at bit position 2*(j/4).
inline void unpack_q3k_scales(const uint8_t packed[kKScaleBytes], int8_t scales[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0x0F) : (packed[j - 8] >> 4);
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

// IQ4_XS: the 6-bit scale of sub-block ib, minus the +32 bias.
inline int iq4xs_scale(const BlockIq4Xs& b, int ib) {
  const int low = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F;
  const int high = (b.scales_h >> (2 * ib)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace sluice::kernels
