// The AVX-512 VNNI packed (row-interleaved) K-quant kernels
// (x86/kquant_packed_avx512.cpp): packed_dot of a pack_rows group must give,
// for every row and activation column, the very bits the same entry's vec_dot
// gives on the plain row, and Avx2's vec_dot (quant.h), and write nothing but
// its outputs. Weights are random bytes with every 6-bit scale/min pattern,
// extreme scales and fp16 d/dmin extremes (largest finite, subnormal, zero,
// negative); activations are Q8_K-quantized Gaussians, some with runs forced to
// -128 / +127 (bsums kept consistent).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kernels/blocks_kquant.h"
#include "kernels/quant.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

const GgmlType kPackedTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

#define SKIP_WITHOUT_AVX512VNNI()                                                                \
  do {                                                                                           \
    if (!cpu_features().avx512vnni)                                                              \
      GTEST_SKIP()                                                                               \
          << "this CPU lacks AVX-512 F/BW/VL/VNNI; the packed K-quant kernels are not run here"; \
  } while (0)

size_t row_bytes(GgmlType t, int64_t n) {
  return static_cast<size_t>(*ggml_row_bytes(t, static_cast<uint64_t>(n)));
}

void put_half_bits(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// fp16 bit patterns for d / dmin: extremes first, then random finite values.
uint16_t half_value(std::mt19937& rng) {
  static const uint16_t kExtremes[] = {
      0x7BFF,  // 65504, largest finite
      0xFBFF,  // -65504
      0x0001,  // smallest subnormal
      0x83FF,  // negative largest subnormal
      0x0400,  // smallest normal
      0x0000,  // zero
      0x8000,  // negative zero
  };
  const uint32_t pick = rng() % 16;
  if (pick < std::size(kExtremes)) return kExtremes[pick];
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  return fp32_to_fp16(u(rng));
}

// One plain weight row: random quant bytes, per block random fp16 fields (see
// half_value), and scales random, all-max (63 / +127 -128) or all zero.
std::vector<uint8_t> weight_row(GgmlType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> w(row_bytes(t, n));
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  const size_t bb = ggml_type_info(t).block_bytes;
  for (size_t off = 0; off < w.size(); off += bb) {
    uint8_t* blk = w.data() + off;
    const uint32_t scales = rng() % 4;  // 0, 1: random bytes; 2: largest; 3: zero
    if (t == GgmlType::Q6_K) {
      put_half_bits(blk + offsetof(BlockQ6K, d), half_value(rng));
      for (int s = 0; s < kQK_K / 16 && scales >= 2; ++s)
        blk[offsetof(BlockQ6K, scales) + s] = scales == 3 ? 0 : s % 2 ? 0x80 : 0x7F;
    } else {
      put_half_bits(blk, half_value(rng));
      put_half_bits(blk + 2, half_value(rng));
      if (scales >= 2)
        std::memset(blk + 4, scales == 3 ? 0x00 : 0xFF, kKScaleBytes);  // 63 everywhere or 0
    }
  }
  return w;
}

// One Q8_K activation row: the Q8_K quantize of Gaussians, then in some blocks
// a 32-element run forced to -128 or +127 (bsums recomputed), which the
// quantizer itself never produces but the kernels must agree on too.
std::vector<uint8_t> activation_row(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = nd(rng);
  std::vector<BlockQ8K> a(static_cast<size_t>(n / kQK_K));
  kernels_for(GgmlType::Q8_K, Isa::Scalar)->quantize(x.data(), a.data(), n);
  for (BlockQ8K& b : a) {
    const uint32_t force = rng() % 3;
    if (force == 0) continue;
    const int run = static_cast<int>(rng() % 8);
    for (int e = 0; e < 32; ++e) b.qs[32 * run + e] = force == 1 ? -128 : 127;
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int e = 0; e < 16; ++e) sum += b.qs[16 * g + e];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
  }
  std::vector<uint8_t> out(a.size() * sizeof(BlockQ8K));
  std::memcpy(out.data(), a.data(), out.size());
  return out;
}

std::string bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", u);
  return buf;
}

constexpr uint32_t kSentinel = 0x7FA5A5A5;  // a NaN no kernel produces

// The group base offsets past a 64-byte boundary checked: aligned, GGUF's
// in-place 32 (the kernels' other layout variant), and 16 (neither: must work too).
const size_t kGroupOffsets[] = {0, 32, 16};
constexpr size_t kGuard = 64;  // bytes checked untouched on each side of a group
constexpr uint8_t kGuardByte = 0xEE;

// A buffer with `bytes` at `offset` past a 64-byte boundary, kGuard bytes of
// kGuardByte on each side.
struct PlacedBuffer {
  std::vector<uint8_t> storage;
  uint8_t* at;
  size_t bytes;
  PlacedBuffer(size_t bytes_, size_t offset, uint8_t fill)
      : storage(bytes_ + 2 * kGuard + 128, kGuardByte), bytes(bytes_) {
    const auto addr = reinterpret_cast<uintptr_t>(storage.data()) + kGuard;
    at = storage.data() + kGuard + ((64 - addr % 64) % 64) + offset;
    std::memset(at, fill, bytes);
  }
  // The first guard byte changed before or after the placed bytes, or -1.
  long bad_guard() const {
    for (const uint8_t* p = at - kGuard; p < at; ++p)
      if (*p != kGuardByte) return p - at;
    for (const uint8_t* p = at + bytes; p < at + bytes + kGuard; ++p)
      if (*p != kGuardByte) return p - at;
    return -1;
  }
};

// pack_rows + packed_dot of one group placed `offset` bytes past a 64-byte
// boundary against n_act columns, each output memcmp-equal to the AVX-512
// VNNI and the Avx2 vec_dot on the plain rows, every other float of the
// output buffer untouched, and no byte around the packed group written.
void check_group(GgmlType t, int64_t n, int n_act, int64_t out_stride, std::mt19937& rng,
                 size_t offset = 32) {
  const TypeKernels* k = kernels_for(t, Isa::Avx512Vnni);
  const TypeKernels* avx2 = kernels_for(t, Isa::Avx2);
  ASSERT_NE(k, nullptr);
  ASSERT_NE(avx2, nullptr);
  ASSERT_NE(k->pack_rows, nullptr);
  ASSERT_NE(k->packed_dot, nullptr);
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> plain;
  for (int r = 0; r < kPackRows; ++r) {
    const std::vector<uint8_t> w = weight_row(t, n, rng);
    plain.insert(plain.end(), w.begin(), w.end());
  }
  PlacedBuffer packed_buf(kPackRows * rb, offset, 0x5A);
  uint8_t* packed = packed_buf.at;
  k->pack_rows(n, plain.data(), packed);
  EXPECT_EQ(packed_buf.bad_guard(), -1) << ggml_type_name(t) << " offset " << offset;
  std::vector<std::vector<uint8_t>> acts;
  std::vector<const void*> act;
  for (int j = 0; j < n_act; ++j) acts.push_back(activation_row(n, rng));
  for (const auto& a : acts) act.push_back(a.data());

  const size_t out_floats = static_cast<size_t>(n_act * out_stride + 8);
  std::vector<uint32_t> out(out_floats, kSentinel);
  k->packed_dot(n, packed, act.data(), n_act, reinterpret_cast<float*>(out.data()), out_stride);

  const std::string where = std::string(ggml_type_name(t)) + " n=" + std::to_string(n) +
                            " n_act=" + std::to_string(n_act) +
                            " stride=" + std::to_string(out_stride) +
                            " offset=" + std::to_string(offset);
  for (size_t i = 0; i < out_floats; ++i) {
    const int64_t j = static_cast<int64_t>(i) / out_stride,
                  r = static_cast<int64_t>(i) % out_stride;
    if (j < n_act && r < kPackRows) {
      float got;
      std::memcpy(&got, &out[i], 4);
      const uint8_t* row = plain.data() + r * rb;
      const float want = k->vec_dot(n, row, act[j]);
      const float want_avx2 = avx2->vec_dot(n, row, act[j]);
      EXPECT_EQ(bits(got), bits(want))
          << where << " row " << r << " col " << j << ": " << got << " vs " << want;
      EXPECT_EQ(bits(got), bits(want_avx2)) << where << " row " << r << " col " << j << " (Avx2)";
    } else {
      EXPECT_EQ(out[i], kSentinel) << where << ": wrote float " << i << " outside the outputs";
    }
  }
}

TEST(KernelsPackedKquant, RegisteredWithTheVecDotOfTheirIsa) {
  SKIP_WITHOUT_AVX512VNNI();
  for (GgmlType t : kPackedTypes) {
    const TypeKernels* k = kernels_for(t, Isa::Avx512Vnni);
    ASSERT_NE(k, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->pack_rows, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->packed_dot, nullptr) << ggml_type_name(t);
    // The default entry carries them only together with this ISA's vec_dot
    // (on AMX machines Q4_K's vec_dot is Amx's, with no packed pair).
    const TypeKernels& best = kernels_for(t);
    if (best.vec_dot == k->vec_dot) {
      EXPECT_EQ(best.packed_dot, k->packed_dot) << ggml_type_name(t);
      EXPECT_EQ(best.pack_rows, k->pack_rows) << ggml_type_name(t);
    } else {
      EXPECT_EQ(best.packed_dot, nullptr) << ggml_type_name(t);
    }
  }
}

TEST(KernelsPackedKquant, PackedDotIsBitIdenticalToVecDotForEveryColumnCount) {
  SKIP_WITHOUT_AVX512VNNI();
  std::mt19937 rng(20261201);
  for (GgmlType t : kPackedTypes)
    for (int n_act = 1; n_act <= kMaxDotCols; ++n_act) check_group(t, 512, n_act, 16 + n_act, rng);
}

// The layout depends on the group's address mod 64 (aligned words at 0 and
// at 32): every variant, and an address matching neither, must be exact.
TEST(KernelsPackedKquant, PackedDotIsBitIdenticalToVecDotAtEveryGroupAlignment) {
  SKIP_WITHOUT_AVX512VNNI();
  std::mt19937 rng(18);
  for (GgmlType t : kPackedTypes)
    for (size_t offset : kGroupOffsets)
      for (int64_t n : {256, 768})
        for (int n_act : {1, 4, 8}) check_group(t, n, n_act, 16, rng, offset);
}

TEST(KernelsPackedKquant, PackedDotIsBitIdenticalToVecDotForEveryRowLength) {
  SKIP_WITHOUT_AVX512VNNI();
  std::mt19937 rng(77);
  for (GgmlType t : kPackedTypes)
    for (int64_t n : {256, 512, 768, 2048, 2816})
      for (int n_act = 1; n_act <= kMaxDotCols; ++n_act) check_group(t, n, n_act, 37, rng);
}

// pack_rows writes every byte of the group (two different prior contents at
// the same address mod 64 give the same result) and nothing around it.
TEST(KernelsPackedKquant, PackRowsWritesExactlyTheGroup) {
  SKIP_WITHOUT_AVX512VNNI();
  std::mt19937 rng(5);
  for (GgmlType t : kPackedTypes)
    for (size_t offset : kGroupOffsets) {
      const int64_t n = 768;
      const size_t rb = row_bytes(t, n);
      std::vector<uint8_t> plain(kPackRows * rb);
      for (uint8_t& b : plain) b = static_cast<uint8_t>(rng());
      PlacedBuffer a(kPackRows * rb, offset, 0x00), b(kPackRows * rb, offset, 0x11);
      kernels_for(t, Isa::Avx512Vnni)->pack_rows(n, plain.data(), a.at);
      kernels_for(t, Isa::Avx512Vnni)->pack_rows(n, plain.data(), b.at);
      const std::string where =
          std::string(ggml_type_name(t)) + " offset " + std::to_string(offset);
      EXPECT_EQ(std::memcmp(a.at, b.at, kPackRows * rb), 0) << where;
      EXPECT_EQ(a.bad_guard(), -1) << where;
      EXPECT_EQ(b.bad_guard(), -1) << where;
    }
}

}  // namespace
}  // namespace sluice::kernels

// This file's macros end with it (tests/CMakeLists.txt: unity build).
#undef SKIP_WITHOUT_AVX512VNNI
