// Byte layouts of the "legacy" ggml block formats (32 elements per block) and
// the small scalar helpers every implementation of them shares.
//
// The structs mirror ggml's block_* definitions byte for byte (GGUF tensors are
// read by casting the mapped bytes to these), so they hold only byte-sized or
// uint16_t members with no padding; sizes are pinned by static_asserts that
// agree with util/ggml_type.cpp. All multi-byte fields are little-endian, as
// in GGUF; the engine only targets little-endian hosts. Block arrays must be
// 2-byte aligned (the uint16_t fields); GGUF's 32-byte tensor alignment and
// even block sizes guarantee it for mapped tensors.
//
// Element order inside a block (all 4-bit formats): byte qs[j] holds element j
// in its low nibble and element j+16 in its high nibble. For the 5-bit formats
// bit e of the 32-bit little-endian word qh is the 5th (high) bit of element e.
#pragma once

#include <bit>
#include <cstdint>

#include "util/fp16.h"

namespace sluice::kernels {

inline constexpr int kLegacyBlock = 32;  // elements per block, every legacy format

// Q4_0: x = d * (q - 8), q in [0, 15].
struct BlockQ4_0 {
  uint16_t d;       // fp16 scale
  uint8_t qs[16];   // nibbles, see element order above
};
// Q4_1: x = d * q + m, q in [0, 15].
struct BlockQ4_1 {
  uint16_t d;       // fp16 scale
  uint16_t m;       // fp16 offset (the block minimum)
  uint8_t qs[16];
};
// Q5_0: x = d * (q - 16), q in [0, 31] = low nibble | high bit << 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];    // high bits, little-endian uint32, bit e = element e
  uint8_t qs[16];   // low nibbles
};
// Q5_1: x = d * q + m, q in [0, 31].
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
// Q8_0: x = d * q, q in [-127, 127] when written by our quantizer (-128 is a
// valid stored value in weights; activations never hold it, see legacy_impl.h).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
// Q8_1: as Q8_0 plus s = d * sum(q) (fp16), which lets the Q4_1/Q5_1 dot
// products fold the weight offset m in with one multiply per block.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
// IQ4_NL: x = d * kIq4nlValues[q], q in [0, 15] (non-linear levels, tables.h).
struct BlockIq4Nl {
  uint16_t d;
  uint8_t qs[16];
};
// MXFP4 (OCP microscaling FP4): x = 2^(e-127) * E2M1(q). Stored as in ggml:
// the E8M0 exponent byte first, then 16 bytes of E2M1 codes (same nibble order
// as Q4_0). See kMxfp4Values in tables.h for the doubled-code convention.
struct BlockMxfp4 {
  uint8_t e;
  uint8_t qs[16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockMxfp4) == 17);

// 2^(e-128): half the E8M0 scale 2^(e-127), because kMxfp4Values stores every
// E2M1 value doubled. Exact for every e (e = 0 and 1 give float subnormals);
// e = 255 (E8M0 NaN) decodes as 2^127, as in ggml.
constexpr float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// The 32-bit high-bit word of a Q5 block (unaligned, little-endian).
inline uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

}  // namespace sluice::kernels
