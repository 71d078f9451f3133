// Legacy-format kernels (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// IQ4_NL, MXFP4): hand-built blocks decoded to values worked out from the
// format definitions, quantizer error bounds and rounding rules, every ISA
// against the scalar reference, and the scalar vec_dot against a double
// precision dot product of the dequantized rows.
//
// Tolerance of vec_dot (SIMD vs scalar, and scalar vs double): |diff| <=
// 1e-5 * sum_i |w_i a_i|. Both only reorder float sums of exact per-block
// integer dot products (rounding error ~ n_blocks * 2^-24 * sum|w a| worst
// case, far less on average; 4096 elements = 128 blocks -> 7.6e-6).
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/blocks_legacy.h"
#include "kernels/quant.h"
#include "kernels/tables.h"
#include "kernels_test_support.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

constexpr GgmlType kLegacyTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,   GgmlType::Q4_0,
                                     GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,   GgmlType::Q8_0,
                                     GgmlType::IQ4_NL, GgmlType::MXFP4};  // weight types (Q8_1: activations)

std::vector<Isa> available_isas() { return isas_with_legacy_kernels(); }

const TypeKernels& scalar(GgmlType t) {
  const TypeKernels* k = kernels_for(t, Isa::Scalar);
  EXPECT_NE(k, nullptr) << ggml_type_name(t);
  return *k;
}

std::string label(GgmlType t, Isa isa) { return std::string(ggml_type_name(t)) + "/" + isa_name(isa); }

size_t row_bytes(GgmlType t, int64_t n) { return static_cast<size_t>(*ggml_row_bytes(t, static_cast<uint64_t>(n))); }

std::vector<float> dequant(GgmlType t, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  scalar(t).dequantize(row.data(), out.data(), n);
  return out;
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Random raw blocks: every level/code byte random (so all codes occur, incl.
// Q8_0's -128), scale fields replaced by sane finite values.
std::vector<uint8_t> random_row(GgmlType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> row(row_bytes(t, n));
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const std::vector<float> f = random_floats(n, rng);
    scalar(t).quantize(f.data(), row.data(), n);
    return row;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.01f, 0.2f);
  const size_t bb = ggml_type_info(t).block_bytes;
  for (size_t off = 0; off < row.size(); off += bb) {
    auto put16 = [&](size_t at, float v) {
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(&row[off + at], &h, 2);
    };
    if (t == GgmlType::MXFP4) {
      row[off] = static_cast<uint8_t>(118 + byte(rng) % 12);
      continue;
    }
    put16(0, (byte(rng) & 1 ? 1.0f : -1.0f) * scale(rng));
    if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) put16(2, scale(rng) * 10.0f - 1.0f);
  }
  return row;
}

// ---------------------------------------------------------------------------
// Layouts and registry

TEST(KernelsLegacy, BlockStructsMatchTheTypeTable) {
  EXPECT_EQ(sizeof(BlockQ4_0), ggml_type_info(GgmlType::Q4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_1), ggml_type_info(GgmlType::Q4_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_0), ggml_type_info(GgmlType::Q5_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_1), ggml_type_info(GgmlType::Q5_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_0), ggml_type_info(GgmlType::Q8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_1), ggml_type_info(GgmlType::Q8_1).block_bytes);
  EXPECT_EQ(sizeof(BlockIq4Nl), ggml_type_info(GgmlType::IQ4_NL).block_bytes);
  EXPECT_EQ(sizeof(BlockMxfp4), ggml_type_info(GgmlType::MXFP4).block_bytes);
  EXPECT_EQ(offsetof(BlockQ5_0, qh), 2u);
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_1, m), 2u);
  EXPECT_EQ(offsetof(BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(BlockQ5_1, qs), 8u);
  EXPECT_EQ(offsetof(BlockQ8_1, s), 2u);
  EXPECT_EQ(offsetof(BlockQ8_1, qs), 4u);
  EXPECT_EQ(offsetof(BlockMxfp4, e), 0u);
  EXPECT_EQ(offsetof(BlockMxfp4, qs), 1u);
}

TEST(KernelsLegacy, VecDotTypesFollowLlamaCpp) {
  const std::pair<GgmlType, GgmlType> expected[] = {
      {GgmlType::F32, GgmlType::F32},     {GgmlType::F16, GgmlType::F16},   {GgmlType::BF16, GgmlType::BF16},
      {GgmlType::Q4_0, GgmlType::Q8_0},   {GgmlType::Q5_0, GgmlType::Q8_0}, {GgmlType::Q8_0, GgmlType::Q8_0},
      {GgmlType::IQ4_NL, GgmlType::Q8_0}, {GgmlType::MXFP4, GgmlType::Q8_0}, {GgmlType::Q4_1, GgmlType::Q8_1},
      {GgmlType::Q5_1, GgmlType::Q8_1},
  };
  for (const auto& [w, act] : expected) {
    EXPECT_TRUE(is_supported(w)) << ggml_type_name(w);
    EXPECT_EQ(kernels_for(w).vec_dot_type, act) << ggml_type_name(w);
    for (Isa isa : available_isas()) {
      if (const TypeKernels* k = kernels_for(w, isa)) {
        EXPECT_EQ(k->vec_dot_type, act) << label(w, isa);
      }
    }
    // Every scalar entry is complete.
    EXPECT_NE(scalar(w).dequantize, nullptr);
    EXPECT_NE(scalar(w).quantize, nullptr);
    EXPECT_NE(scalar(w).vec_dot, nullptr);
  }
  // Q8_1 is an activation format only.
  EXPECT_FALSE(is_supported(GgmlType::Q8_1));
  EXPECT_NE(kernels_for(GgmlType::Q8_1).quantize, nullptr);
}

TEST(KernelsLegacy, ScalarAlwaysAvailable) {
  EXPECT_NE(kernels_for(GgmlType::Q4_0, Isa::Scalar), nullptr);
  EXPECT_EQ(available_isas().front(), Isa::Scalar);
}

// On a CPU with AVX2 + FMA + F16C every legacy weight type has an AVX2 dot
// product and the default kernels use it (otherwise the SIMD comparisons
// below would silently test nothing).
TEST(KernelsLegacy, Avx2DotProductsAreRegisteredWhenTheCpuHasThem) {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx2 && f.fma && f.f16c)) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  for (GgmlType t : kLegacyTypes) {
    const TypeKernels* k = kernels_for(t, Isa::Avx2);
    ASSERT_NE(k, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->vec_dot, nullptr) << ggml_type_name(t);
    // AVX-512 VNNI, then AVX-VNNI versions (bit-identical) take precedence
    // where the CPU has them.
    VecDotFn want = k->vec_dot;
    for (Isa isa : {Isa::AvxVnni, Isa::Avx512Vnni}) {
      const TypeKernels* v = kernels_for(t, isa);
      if (v && v->vec_dot) want = v->vec_dot;
    }
    EXPECT_EQ(kernels_for(t).vec_dot, want) << ggml_type_name(t);
  }
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::F16, GgmlType::BF16}) {
    EXPECT_NE(kernels_for(t, Isa::Avx2)->quantize, nullptr) << ggml_type_name(t);
  }
  EXPECT_EQ(best_isa(), f.amx_int8     ? Isa::Amx
                       : f.avx512vnni ? Isa::Avx512Vnni
                       : f.avxvnni    ? Isa::AvxVnni
                                      : Isa::Avx2);
}

// ---------------------------------------------------------------------------
// Hand-built blocks -> exact values (every ISA that has a dequantizer)

void expect_dequant(GgmlType t, const void* blocks, int64_t n, const std::vector<float>& expected) {
  for (Isa isa : available_isas()) {
    const TypeKernels* k = kernels_for(t, isa);
    if (!k || !k->dequantize) continue;
    std::vector<float> got(static_cast<size_t>(n), -999.0f);
    k->dequantize(blocks, got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i], expected[i]) << label(t, isa) << " element " << i;
    }
  }
}

TEST(KernelsLegacy, DequantizeQ4_0HandBuilt) {
  BlockQ4_0 b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> e(32);
  for (int j = 0; j < 16; ++j) {
    e[j] = 0.5f * static_cast<float>(j - 8);        // low nibble j
    e[j + 16] = 0.5f * static_cast<float>(7 - j);   // high nibble 15-j, minus 8
  }
  EXPECT_EQ(e[0], -4.0f);
  EXPECT_EQ(e[16], 3.5f);
  expect_dequant(GgmlType::Q4_0, &b, 32, e);
}

TEST(KernelsLegacy, DequantizeQ4_1HandBuilt) {
  BlockQ4_1 b{};
  b.d = 0x3400;  // 0.25
  b.m = 0xbc00;  // -1.0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  std::vector<float> e(32);
  for (int j = 0; j < 16; ++j) {
    e[j] = 0.25f * static_cast<float>(j) - 1.0f;
    e[j + 16] = 0.25f * static_cast<float>(15 - j) - 1.0f;
  }
  EXPECT_EQ(e[15], 2.75f);
  expect_dequant(GgmlType::Q4_1, &b, 32, e);
}

// qh bytes {0x01, 0, 0, 0x80}: only elements 0 and 31 have their 5th bit set.
// qs[0] = 0x35 -> element 0 low nibble 5, element 16 low nibble 3;
// qs[15] = 0xa0 -> element 15 low nibble 0, element 31 low nibble 10.
TEST(KernelsLegacy, DequantizeQ5_0HighBits) {
  BlockQ5_0 b{};
  b.d = 0x4000;  // 2.0
  b.qh[0] = 0x01;
  b.qh[3] = 0x80;
  b.qs[0] = 0x35;
  b.qs[15] = 0xa0;
  std::vector<float> e(32, 2.0f * -16.0f);  // level 0 - 16
  e[0] = 2.0f * ((5 | 16) - 16);   // 10
  e[16] = 2.0f * (3 - 16);         // -26
  e[15] = 2.0f * (0 - 16);         // -32
  e[31] = 2.0f * ((10 | 16) - 16); // 20
  expect_dequant(GgmlType::Q5_0, &b, 32, e);
}

TEST(KernelsLegacy, DequantizeQ5_1HighBits) {
  BlockQ5_1 b{};
  b.d = 0x3c00;  // 1.0
  b.m = 0x3800;  // 0.5
  b.qh[0] = 0x01;
  b.qh[3] = 0x80;
  b.qs[0] = 0x35;
  b.qs[15] = 0xa0;
  std::vector<float> e(32, 0.5f);
  e[0] = 21.5f;   // 5 | 16
  e[16] = 3.5f;
  e[15] = 0.5f;
  e[31] = 26.5f;  // 10 | 16
  expect_dequant(GgmlType::Q5_1, &b, 32, e);
}

TEST(KernelsLegacy, DequantizeQ8_0AndQ8_1HandBuilt) {
  BlockQ8_0 b{};
  b.d = 0x3000;  // 0.125
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  b.qs[31] = -128;
  std::vector<float> e(32);
  for (int j = 0; j < 32; ++j) e[j] = static_cast<float>(j - 16) / 8.0f;
  e[31] = -16.0f;
  expect_dequant(GgmlType::Q8_0, &b, 32, e);

  BlockQ8_1 a{};
  a.d = 0x3800;  // 0.5
  a.s = 0x5000;  // 32.0, not used by dequantize
  for (int j = 0; j < 32; ++j) a.qs[j] = static_cast<int8_t>(j % 2 ? 3 : -5);
  std::vector<float> ea(32);
  for (int j = 0; j < 32; ++j) ea[j] = j % 2 ? 1.5f : -2.5f;
  expect_dequant(GgmlType::Q8_1, &a, 32, ea);
}

TEST(KernelsLegacy, DequantizeIq4NlUsesTheNonLinearTable) {
  BlockIq4Nl b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  // The IQ4_NL levels {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25,
  // 38, 53, 69, 89, 113}, halved.
  const float half_levels[16] = {-63.5f, -52.0f, -41.5f, -32.5f, -24.5f, -17.5f, -11.0f, -5.0f,
                                 0.5f,   6.5f,   12.5f,  19.0f,  26.5f,  34.5f,  44.5f,  56.5f};
  std::vector<float> e(32);
  for (int j = 0; j < 16; ++j) {
    e[j] = half_levels[j];
    e[j + 16] = half_levels[15 - j];
  }
  expect_dequant(GgmlType::IQ4_NL, &b, 32, e);
}

TEST(KernelsLegacy, DequantizeMxfp4E2M1AndE8M0) {
  // E2M1 magnitudes of codes 0-7; codes 8-15 are the same values negated.
  const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  auto value = [&](int code) { return code < 8 ? e2m1[code] : -e2m1[code - 8]; };
  BlockMxfp4 b[4]{};
  b[0].e = 127;  // scale 2^0
  b[1].e = 130;  // scale 2^3
  b[2].e = 1;    // scale 2^-126 (smallest normal)
  b[3].e = 0;    // scale 2^-127 (a float subnormal)
  for (auto& blk : b) {
    for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
  }
  const float scales[4] = {1.0f, 8.0f, std::ldexp(1.0f, -126), std::ldexp(1.0f, -127)};
  std::vector<float> e(128);
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 16; ++j) {
      e[32 * k + j] = value(j) * scales[k];
      e[32 * k + j + 16] = value(15 - j) * scales[k];
    }
  }
  EXPECT_EQ(e[32 + 7], 48.0f);   // 6 * 8
  EXPECT_EQ(e[32 + 16], -48.0f); // code 15 = -6
  EXPECT_EQ(e[96 + 1], std::ldexp(1.0f, -128));
  expect_dequant(GgmlType::MXFP4, b, 128, e);
}

TEST(KernelsLegacy, DequantizeF16AndBf16HandBuilt) {
  const uint16_t h[9] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00, 0x3555, 0x0400, 0x3801};
  const std::vector<float> eh = {1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24), -0.0f,
                                 std::numeric_limits<float>::infinity(), 0.333251953125f,
                                 std::ldexp(1.0f, -14), 0.50048828125f};
  expect_dequant(GgmlType::F16, h, 9, eh);
  EXPECT_TRUE(std::signbit([&] { float y[9]; scalar(GgmlType::F16).dequantize(h, y, 9); return y[4]; }()));

  const uint16_t b[9] = {0x3f80, 0xc040, 0x4049, 0x0000, 0x8000, 0xff80, 0x3f81, 0x0001, 0x4780};
  const std::vector<float> eb = {1.0f, -3.0f, 3.140625f, 0.0f, -0.0f, -std::numeric_limits<float>::infinity(),
                                 1.0078125f, std::ldexp(1.0f, -133), 65536.0f};
  expect_dequant(GgmlType::BF16, b, 9, eb);
}

// ---------------------------------------------------------------------------
// Quantizers: hand-checked rounding rules

TEST(KernelsLegacy, QuantizeQ8_0RoundsHalfToEvenLikeLlamaCppAvx2) {
  // amax = 127 makes the multiplier exactly 1, so the ties are exact.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 0.5f;
  x[2] = 1.5f;
  x[3] = 2.5f;
  x[4] = -0.5f;
  x[5] = -2.5f;
  x[6] = -126.5f;
  x[7] = 3.49f;
  const int8_t expected[8] = {127, 0, 2, 2, 0, -2, -126, 3};
  for (Isa isa : available_isas()) {
    const TypeKernels* k = kernels_for(GgmlType::Q8_0, isa);
    if (!k || !k->quantize) continue;
    BlockQ8_0 b{};
    k->quantize(x.data(), &b, 32);
    EXPECT_EQ(b.d, 0x3c00) << isa_name(isa);  // d = 127 / 127 = 1
    for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], expected[j]) << isa_name(isa) << " j=" << j;
    for (int j = 8; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
  }
}

TEST(KernelsLegacy, QuantizeQ8_1StoresScaledLevelSum) {
  std::mt19937 rng(11);
  const std::vector<float> x = random_floats(256, rng, 3.0f);
  for (Isa isa : available_isas()) {
    const TypeKernels* k = kernels_for(GgmlType::Q8_1, isa);
    if (!k || !k->quantize) continue;
    std::vector<BlockQ8_1> b(8);
    k->quantize(x.data(), b.data(), 256);
    for (int i = 0; i < 8; ++i) {
      float amax = 0.0f;
      int sum = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(x[32 * i + j]));
        sum += b[i].qs[j];
      }
      const float d = amax / 127.0f;
      EXPECT_EQ(b[i].d, fp32_to_fp16(d)) << isa_name(isa);
      EXPECT_EQ(b[i].s, fp32_to_fp16(d * static_cast<float>(sum))) << isa_name(isa) << " block " << i;
    }
  }
}

TEST(KernelsLegacy, QuantizeQ4_0MapsTheExtremeToLevelZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // signed absmax -> d = -8 / -8 = 1
  x[1] = 8.0f;   // 16.5 -> clamped to level 15 (value 7)
  x[2] = 0.4f;   // 8.9 -> level 8 (value 0)
  x[3] = 0.5f;   // 9.0 -> level 9 (value 1)
  x[17] = -3.6f; // 4.9 -> level 4 (value -4)
  BlockQ4_0 b{};
  scalar(GgmlType::Q4_0).quantize(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);
  EXPECT_EQ(b.qs[1] & 0x0f, 15);
  EXPECT_EQ(b.qs[2] & 0x0f, 8);
  EXPECT_EQ(b.qs[3] & 0x0f, 9);
  EXPECT_EQ(b.qs[1] >> 4, 4);  // element 17
  EXPECT_EQ(b.qs[0] >> 4, 8);  // element 16 = 0
}

TEST(KernelsLegacy, QuantizeMxfp4PicksNearestCodeFirstOnTies) {
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;    // amax 6: floor(log2 6) = 2 -> e = 127, half-scale 0.5
  x[1] = 5.0f;    // tie between 4 and 6 -> the first code (6 = value 4)
  x[2] = -0.25f;  // tie between 0 and -0.5 -> code 0
  x[3] = -0.3f;   // nearest -0.5 -> code 9
  x[4] = 2.6f;    // nearest 3 -> code 5
  BlockMxfp4 b{};
  scalar(GgmlType::MXFP4).quantize(x.data(), &b, 32);
  EXPECT_EQ(b.e, 127);
  EXPECT_EQ(b.qs[0] & 0x0f, 7);
  EXPECT_EQ(b.qs[1] & 0x0f, 6);
  EXPECT_EQ(b.qs[2] & 0x0f, 0);
  EXPECT_EQ(b.qs[3] & 0x0f, 9);
  EXPECT_EQ(b.qs[4] & 0x0f, 5);

  std::vector<float> zero(32, 0.0f);
  scalar(GgmlType::MXFP4).quantize(zero.data(), &b, 32);
  EXPECT_EQ(b.e, 0);
}

// ---------------------------------------------------------------------------
// Quantizer error bounds (scalar reference quantizers, random data)

// Rows with a zero block, a block with one outlier, and Gaussian blocks.
std::vector<float> quantizer_input(int64_t n, std::mt19937& rng) {
  std::vector<float> x = random_floats(n, rng, 2.0f);
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  x[40] = 50.0f;
  return x;
}

TEST(KernelsLegacy, QuantizeErrorBoundsOfLinearFormats) {
  constexpr int64_t n = 32 * 64;
  std::mt19937 rng(5);
  const std::vector<float> x = quantizer_input(n, rng);
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_1,
                     GgmlType::Q5_1}) {
    std::vector<uint8_t> q(row_bytes(t, n));
    scalar(t).quantize(x.data(), q.data(), n);
    const std::vector<float> y = dequant(t, q, n);
    const size_t bb = ggml_type_info(t).block_bytes;
    for (int64_t i = 0; i < n / 32; ++i) {
      const float* xb = x.data() + 32 * i;
      float amax = 0.0f, max = 0.0f, mn = xb[0], mx = xb[0];
      for (int j = 0; j < 32; ++j) {
        if (std::fabs(xb[j]) > amax) { amax = std::fabs(xb[j]); max = xb[j]; }
        mn = std::min(mn, xb[j]);
        mx = std::max(mx, xb[j]);
      }
      uint16_t d16_bits, m16_bits = 0;
      std::memcpy(&d16_bits, &q[i * bb], 2);
      if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) std::memcpy(&m16_bits, &q[i * bb + 2], 2);
      const double d16 = fp16_to_fp32(d16_bits), m16 = fp16_to_fp32(m16_bits);
      for (int j = 0; j < 32; ++j) {
        const double err = std::fabs(static_cast<double>(xb[j]) - y[32 * i + j]);
        double bound = 0.0;
        if (t == GgmlType::Q8_0 || t == GgmlType::Q8_1) {
          const double d = amax / 127.0;  // half a step, plus 127 steps of fp16 scale rounding
          bound = 0.5 * d + 127.0 * std::fabs(d16 - d) + 1e-6 * amax;
        } else if (t == GgmlType::Q4_0 || t == GgmlType::Q5_0) {
          const int half = t == GgmlType::Q4_0 ? 8 : 16;
          const double d = max / -static_cast<double>(half);
          // The level opposite the extreme is clamped: one full step there.
          const bool clamped = d != 0.0 && xb[j] / d + half + 0.5 >= 2 * half;
          bound = (clamped ? 1.0 : 0.5) * std::fabs(d) + half * std::fabs(d16 - d) + 1e-6 * amax;
        } else {
          const int levels = t == GgmlType::Q4_1 ? 15 : 31;
          const double d = (static_cast<double>(mx) - mn) / levels;
          bound = 0.5 * d + levels * std::fabs(d16 - d) + std::fabs(m16 - mn) + 1e-6 * amax;
        }
        ASSERT_LE(err, bound) << ggml_type_name(t) << " block " << i << " element " << j << " x=" << xb[j];
      }
    }
  }
}

TEST(KernelsLegacy, QuantizeMxfp4ChoosesTheNearestRepresentableValue) {
  constexpr int64_t n = 32 * 64;
  std::mt19937 rng(6);
  const std::vector<float> x = quantizer_input(n, rng);
  std::vector<BlockMxfp4> q(n / 32);
  scalar(GgmlType::MXFP4).quantize(x.data(), q.data(), n);
  const std::vector<float> y = dequant(GgmlType::MXFP4, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(q.data()),
                                                                             reinterpret_cast<uint8_t*>(q.data()) + n / 32 * 17), n);
  for (int64_t i = 0; i < n / 32; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * i + j]));
    if (amax > 0.0f) {  // shared exponent puts amax in [4, 8) x 2^(e-127)
      const float scaled = amax / std::ldexp(1.0f, q[i].e - 127);
      EXPECT_GE(scaled, 4.0f);
      EXPECT_LT(scaled, 8.0f);
    }
    const float half_scale = e8m0_to_fp32_half(q[i].e);
    for (int j = 0; j < 32; ++j) {
      float best = std::numeric_limits<float>::infinity();
      for (int8_t v : kMxfp4Values) best = std::min(best, std::fabs(v * half_scale - x[32 * i + j]));
      EXPECT_EQ(std::fabs(y[32 * i + j] - x[32 * i + j]), best) << "block " << i << " element " << j;
    }
  }
}

TEST(KernelsLegacy, QuantizeIq4NlBeatsTheNaiveScale) {
  constexpr int64_t n = 32 * 64;
  std::mt19937 rng(7);
  const std::vector<float> x = quantizer_input(n, rng);
  std::vector<uint8_t> q(row_bytes(GgmlType::IQ4_NL, n));
  scalar(GgmlType::IQ4_NL).quantize(x.data(), q.data(), n);
  const std::vector<float> y = dequant(GgmlType::IQ4_NL, q, n);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float* xb = x.data() + 32 * i;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(xb[j]) > amax) { amax = std::fabs(xb[j]); max = xb[j]; }
    }
    // Naive: d = max / -127 (the extreme on level 0), nearest level for the rest.
    const double d = max / -127.0;
    double err_naive = 0.0, err = 0.0;
    for (int j = 0; j < 32; ++j) {
      double best = std::numeric_limits<double>::infinity();
      for (int8_t v : kIq4nlValues) best = std::min(best, std::fabs(v * d - xb[j]));
      const double w = static_cast<double>(xb[j]) * xb[j];
      err_naive += w * best * best;
      err += w * (y[32 * i + j] - xb[j]) * (y[32 * i + j] - xb[j]);
    }
    // Slack: the chosen scale is stored as fp16.
    EXPECT_LE(err, err_naive * 1.01 + 1e-12) << "block " << i;
    if (amax == 0.0f) {
      EXPECT_EQ(err, 0.0);
    }
  }
}

TEST(KernelsLegacy, F16AndBf16RoundTripRepresentableValuesExactly) {
  std::vector<uint16_t> bits;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) continue;  // NaN: checked separately
    bits.push_back(static_cast<uint16_t>(h));
  }
  const int64_t n = static_cast<int64_t>(bits.size());
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16}) {
    std::vector<float> f(bits.size());
    scalar(t).dequantize(bits.data(), f.data(), n);
    for (Isa isa : available_isas()) {
      const TypeKernels* k = kernels_for(t, isa);
      if (!k || !k->quantize) continue;
      std::vector<uint16_t> back(bits.size());
      k->quantize(f.data(), back.data(), n);
      EXPECT_EQ(back, bits) << label(t, isa);
      const float nan = std::numeric_limits<float>::quiet_NaN();
      uint16_t nan_bits = 0;
      k->quantize(&nan, &nan_bits, 1);
      float nan_back = 0.0f;
      scalar(t).dequantize(&nan_bits, &nan_back, 1);
      EXPECT_TRUE(std::isnan(nan_back)) << label(t, isa);
    }
  }
  // F32 "quantize" is a copy.
  const float v[3] = {1.5f, -0.0f, 3e38f};
  float c[3];
  scalar(GgmlType::F32).quantize(v, c, 3);
  EXPECT_EQ(std::memcmp(v, c, sizeof(v)), 0);
}

// ---------------------------------------------------------------------------
// SIMD converters are bit-identical to the scalar ones

TEST(KernelsLegacy, SimdQuantizersAndDequantizersMatchScalarBitForBit) {
  std::mt19937 rng(8);
  for (int64_t n : {32, 64, 96, 1024, 4096}) {
    std::vector<float> x = random_floats(n, rng, 4.0f);
    // Exact ties for the round-half-even check: amax 127 -> multiplier 1.
    x[0] = 127.0f;
    for (int j = 1; j < 32; ++j) x[j] = static_cast<float>(j) - 15.5f;
    for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::F16, GgmlType::BF16}) {
      std::vector<uint8_t> ref(row_bytes(t, n));
      scalar(t).quantize(x.data(), ref.data(), n);
      for (Isa isa : available_isas()) {
        const TypeKernels* k = kernels_for(t, isa);
        if (!k || !k->quantize) continue;
        std::vector<uint8_t> got(ref.size(), 0xaa);
        k->quantize(x.data(), got.data(), n);
        EXPECT_EQ(got, ref) << label(t, isa) << " n=" << n;
      }
    }
    for (GgmlType t : kLegacyTypes) {
      const std::vector<uint8_t> row = random_row(t, n, rng);
      const std::vector<float> ref = dequant(t, row, n);
      for (Isa isa : available_isas()) {
        const TypeKernels* k = kernels_for(t, isa);
        if (!k || !k->dequantize) continue;
        std::vector<float> got(static_cast<size_t>(n));
        k->dequantize(row.data(), got.data(), n);
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0) << label(t, isa) << " n=" << n;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// vec_dot: every ISA vs scalar, scalar vs double

struct DotCase {
  std::vector<uint8_t> w, act;
  double exact = 0.0;    // sum of dequant(w) * dequant(act) (+ Q8_1's s correction), in double
  double abs_sum = 0.0;  // sum |dequant(w) * dequant(act)|, the tolerance scale
};

// Offset formats use the stored s = fp16(d * sum q) instead of d16 * sum q; the
// difference is part of llama.cpp's arithmetic, so the reference includes it.
double q8_1_offset_correction(GgmlType t, const DotCase& c, int64_t n) {
  if (t != GgmlType::Q4_1 && t != GgmlType::Q5_1) return 0.0;
  const size_t wb = ggml_type_info(t).block_bytes;
  const auto* a = reinterpret_cast<const BlockQ8_1*>(c.act.data());
  double corr = 0.0;
  for (int64_t i = 0; i < n / 32; ++i) {
    uint16_t m_bits;
    std::memcpy(&m_bits, &c.w[i * wb + 2], 2);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += a[i].qs[j];
    corr += fp16_to_fp32(m_bits) * (static_cast<double>(fp16_to_fp32(a[i].s)) -
                                     static_cast<double>(fp16_to_fp32(a[i].d)) * sum);
  }
  return corr;
}

DotCase make_dot_case(GgmlType t, int64_t n, std::mt19937& rng, bool quantized_weights) {
  DotCase c;
  const GgmlType at = scalar(t).vec_dot_type;
  if (quantized_weights) {
    const std::vector<float> wf = random_floats(n, rng);
    c.w.resize(row_bytes(t, n));
    scalar(t).quantize(wf.data(), c.w.data(), n);
  } else {
    c.w = random_row(t, n, rng);
  }
  const std::vector<float> af = random_floats(n, rng, 3.0f);
  c.act.resize(row_bytes(at, n));
  scalar(at).quantize(af.data(), c.act.data(), n);
  const std::vector<float> wd = dequant(t, c.w, n), ad = dequant(at, c.act, n);
  for (int64_t i = 0; i < n; ++i) {
    c.exact += static_cast<double>(wd[i]) * ad[i];
    c.abs_sum += std::fabs(static_cast<double>(wd[i]) * ad[i]);
  }
  c.exact += q8_1_offset_correction(t, c, n);
  return c;
}

TEST(KernelsLegacy, VecDotMatchesDoublePrecisionAndScalarOnEveryIsa) {
  std::mt19937 rng(9);
  for (GgmlType t : kLegacyTypes) {
    const bool plain = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
    const std::vector<int64_t> lengths = plain ? std::vector<int64_t>{1, 7, 31, 33, 100, 256, 1000, 4096}
                                               : std::vector<int64_t>{32, 64, 96, 160, 1024, 4096};
    for (int64_t n : lengths) {
      for (bool quantized : {true, false}) {
        const DotCase c = make_dot_case(t, n, rng, quantized);
        const double tol = 1e-5 * c.abs_sum + 1e-30;
        const float ref = scalar(t).vec_dot(n, c.w.data(), c.act.data());
        EXPECT_NEAR(ref, c.exact, tol) << "scalar " << ggml_type_name(t) << " n=" << n;
        for (Isa isa : available_isas()) {
          const TypeKernels* k = kernels_for(t, isa);
          if (!k || !k->vec_dot || isa == Isa::Scalar) continue;
          const float got = k->vec_dot(n, c.w.data(), c.act.data());
          EXPECT_NEAR(got, ref, tol) << label(t, isa) << " n=" << n << (quantized ? " quantized" : " raw");
          // Deterministic: the same call gives the same bits.
          EXPECT_EQ(got, k->vec_dot(n, c.w.data(), c.act.data()));
        }
      }
    }
  }
}

// A dot product whose value is known exactly: all weights of a Q4_0 block at
// level 9 (value d) times Q8_0 activations 1..32 (scale 0.5).
TEST(KernelsLegacy, VecDotQ4_0HandBuilt) {
  BlockQ4_0 w[2]{};
  BlockQ8_0 a[2]{};
  for (int i = 0; i < 2; ++i) {
    w[i].d = i == 0 ? 0x3c00 : 0x4000;  // 1, 2
    for (int j = 0; j < 16; ++j) w[i].qs[j] = 0x99;  // level 9 -> +1
    a[i].d = 0x3800;  // 0.5
    for (int j = 0; j < 32; ++j) a[i].qs[j] = static_cast<int8_t>(j + 1);
  }
  // sum_j (j+1) = 528; block 0: 1 * 0.5 * 528, block 1: 2 * 0.5 * 528.
  for (Isa isa : available_isas()) {
    const TypeKernels* k = kernels_for(GgmlType::Q4_0, isa);
    if (!k || !k->vec_dot) continue;
    EXPECT_EQ(k->vec_dot(64, w, a), 792.0f) << isa_name(isa);
    EXPECT_EQ(k->vec_dot(32, w, a), 264.0f) << isa_name(isa);
  }
}

// The 32 integer levels q and the scale d of one block of a symmetric format.
void symmetric_levels(GgmlType t, const uint8_t* b, int q[32], float& d) {
  if (t == GgmlType::Q8_0) {
    const auto& blk = *reinterpret_cast<const BlockQ8_0*>(b);
    for (int j = 0; j < 32; ++j) q[j] = blk.qs[j];
    d = fp16_to_fp32(blk.d);
  } else if (t == GgmlType::Q5_0) {
    const auto& blk = *reinterpret_cast<const BlockQ5_0*>(b);
    uint32_t qh = 0;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < 16; ++j) {
      q[j] = ((blk.qs[j] & 0x0f) | ((qh >> j & 1) << 4)) - 16;
      q[j + 16] = ((blk.qs[j] >> 4) | ((qh >> (j + 16) & 1) << 4)) - 16;
    }
    d = fp16_to_fp32(blk.d);
  } else {
    const uint8_t* qs = t == GgmlType::MXFP4 ? b + 1 : b + 2;
    for (int j = 0; j < 16; ++j) {
      const int lo = qs[j] & 0x0f, hi = qs[j] >> 4;
      q[j] = t == GgmlType::Q4_0 ? lo - 8 : t == GgmlType::IQ4_NL ? kIq4nlValues[lo] : kMxfp4Values[lo];
      q[j + 16] = t == GgmlType::Q4_0 ? hi - 8 : t == GgmlType::IQ4_NL ? kIq4nlValues[hi] : kMxfp4Values[hi];
    }
    uint16_t d16 = 0;
    std::memcpy(&d16, b, 2);
    d = t == GgmlType::MXFP4 ? e8m0_to_fp32_half(b[0]) : fp16_to_fp32(d16);
  }
}

// The float order of the x86 symmetric dots (x86/legacy_x86_dot_body.h),
// written out: per block, eight lane sums of four consecutive products,
// fused-multiply-added with d_w * d_a into the even-block or odd-block 8-lane
// accumulator; then the accumulators are added and reduced as hsum does.
float x86_order_dot(GgmlType t, int64_t n, const uint8_t* w, const void* act) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  const size_t bytes = ggml_type_info(t).block_bytes;
  float acc[2][8] = {};
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    int q[32];
    float d = 0;
    symmetric_levels(t, w + static_cast<size_t>(i) * bytes, q, d);
    const float s = d * fp16_to_fp32(a[i].d);
    for (int k = 0; k < 8; ++k) {
      int lane = 0;
      for (int e = 4 * k; e < 4 * k + 4; ++e) lane += q[e] * a[i].qs[e];
      acc[i % 2][k] = std::fma(s, static_cast<float>(lane), acc[i % 2][k]);
    }
  }
  float v[8];
  for (int k = 0; k < 8; ++k) v[k] = acc[0][k] + acc[1][k];
  const float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
  return (s0 + s2) + (s1 + s3);
}

// The block-sum rounding of the AVX-512 VNNI set's symmetric dots (quant.h),
// written out: per block the exact integer sum of its 32 products (the levels
// of x86_order_dot), fused-multiply-added with d_w * d_a into the even-block
// or odd-block accumulator; then the two added.
float blocksum_order_dot(GgmlType t, int64_t n, const uint8_t* w, const void* act) {
  const auto* a = static_cast<const BlockQ8_0*>(act);
  const size_t bytes = ggml_type_info(t).block_bytes;
  float acc[2] = {};
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    float d = 0;
    int q[32];
    symmetric_levels(t, w + static_cast<size_t>(i) * bytes, q, d);
    int sum = 0;
    for (int e = 0; e < 32; ++e) sum += q[e] * a[i].qs[e];
    acc[i % 2] = std::fma(d * fp16_to_fp32(a[i].d), static_cast<float>(sum), acc[i % 2]);
  }
  return acc[0] + acc[1];
}

// Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 give the same bits on every SIMD ISA that has
// them (AVX2 and AVX-VNNI on x86; NEON, plain or sdot, on AArch64): integer
// sums are exact and the float steps follow x86_order_dot, so one model has
// the same logits on x86 and ARM. AVX-512 VNNI follows its own
// blocksum_order_dot (quant.h). vec_dot and every column of vec_dot_cols.
// Weights include extreme bytes (random_row), and -128 in Q8_0 weights.
TEST(KernelsLegacy, SymmetricDotsFollowTheirSetsOrderOnEverySimdIsa) {
  if (cpu_features().neon) {
    // scripts/test.sh --aarch64 reads this line to check that both builds ran.
    std::printf("[neon] kernels: %s\n", cpu_features().neon_dotprod ? "sdot" : "plain (no dot product)");
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
      ASSERT_NE(kernels_for(t, Isa::Neon), nullptr) << ggml_type_name(t);
      EXPECT_EQ(kernels_for(t).vec_dot, kernels_for(t, Isa::Neon)->vec_dot) << ggml_type_name(t);
    }
  }
  std::mt19937 rng(15);
  int checked = 0;
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    for (int64_t n : {32, 64, 96, 1024, 4096}) {
      for (bool quantized : {true, false}) {
        std::vector<DotCase> cols;
        std::vector<const void*> act;
        for (int j = 0; j < kMaxDotCols; ++j) cols.push_back(make_dot_case(t, n, rng, quantized));
        if (t == GgmlType::Q8_0) cols[0].w[2] = 0x80;  // a -128 weight level
        for (const DotCase& c : cols) act.push_back(c.act.data());
        for (Isa isa : simd_isas()) {
          const TypeKernels* k = kernels_for(t, isa);
          if (!k || !k->vec_dot) continue;
          ++checked;
          const auto model = isa == Isa::Avx512Vnni ? blocksum_order_dot : x86_order_dot;
          const float want = model(t, n, cols[0].w.data(), act[0]);
          const float got = k->vec_dot(n, cols[0].w.data(), act[0]);
          EXPECT_EQ(0, std::memcmp(&want, &got, sizeof(float)))
              << label(t, isa) << " n=" << n << ": " << got << " vs its order " << want;
          if (!k->vec_dot_cols) continue;
          std::vector<float> out(kMaxDotCols);
          for (int m : {1, 3, kMaxDotCols}) {
            k->vec_dot_cols(n, cols[0].w.data(), act.data(), m, out.data());
            for (int j = 0; j < m; ++j) {
              const float ref = model(t, n, cols[0].w.data(), act[j]);
              EXPECT_EQ(0, std::memcmp(&ref, &out[j], sizeof(float)))
                  << label(t, isa) << " n=" << n << " m=" << m << " col " << j;
            }
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no SIMD legacy kernels";
}

// The float order of x86's offset dots (Q4_1, Q5_1 with Q8_1 activations;
// x86/legacy_x86_dot_body.h's dot_offset), written out: the d_w * d_a part
// as the symmetric order (unsigned levels); the m * s terms summed per pair
// of blocks, that pair sum added to the running offsets, and the offsets added
// after hsum. (Each m * s is exact in float, a product of two fp16 values, so
// whether a compiler fuses it into an fma does not change a bit.)
float x86_order_offset_dot(GgmlType t, int64_t n, const uint8_t* w, const void* act) {
  const auto* a = static_cast<const BlockQ8_1*>(act);
  const size_t bytes = ggml_type_info(t).block_bytes;
  float acc[2][8] = {};
  float offsets = 0.0f;
  float m[2] = {}, sa[2] = {};
  const int64_t nb = n / kLegacyBlock;
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = w + static_cast<size_t>(i) * bytes;
    uint16_t d16 = 0, m16 = 0;
    std::memcpy(&d16, b, 2);
    std::memcpy(&m16, b + 2, 2);
    int q[32];
    uint32_t qh = 0;
    const uint8_t* qs = b + 4;
    if (t == GgmlType::Q5_1) {
      std::memcpy(&qh, b + 4, 4);
      qs = b + 8;
    }
    for (int j = 0; j < 16; ++j) {
      q[j] = (qs[j] & 0x0f) | static_cast<int>((qh >> j & 1) << 4);
      q[j + 16] = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1) << 4);
    }
    const float s = fp16_to_fp32(d16) * fp16_to_fp32(a[i].d);
    for (int k = 0; k < 8; ++k) {
      int lane = 0;
      for (int e = 4 * k; e < 4 * k + 4; ++e) lane += q[e] * a[i].qs[e];
      acc[i % 2][k] = std::fma(s, static_cast<float>(lane), acc[i % 2][k]);
    }
    m[i % 2] = fp16_to_fp32(m16);
    sa[i % 2] = fp16_to_fp32(a[i].s);
    if (i % 2 == 1) offsets = offsets + std::fma(m[0], sa[0], m[1] * sa[1]);
    if (i % 2 == 0 && i + 1 == nb) offsets = std::fma(m[0], sa[0], offsets);
  }
  float v[8];
  for (int k = 0; k < 8; ++k) v[k] = acc[0][k] + acc[1][k];
  const float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
  return ((s0 + s2) + (s1 + s3)) + offsets;
}

// Q4_1 and Q5_1 give the same bits on every SIMD ISA that has them (AVX2 and
// AVX-VNNI on x86; NEON, plain or sdot, on AArch64): x86_order_offset_dot.
TEST(KernelsLegacy, OffsetDotsFollowTheX86OrderOnEverySimdIsa) {
  if (cpu_features().neon) {
    for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1}) {
      ASSERT_NE(kernels_for(t, Isa::Neon), nullptr) << ggml_type_name(t);
    }
  }
  std::mt19937 rng(16);
  int checked = 0;
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1}) {
    for (int64_t n : {32, 64, 96, 1024, 4096}) {
      for (bool quantized : {true, false}) {
        std::vector<DotCase> cols;
        std::vector<const void*> act;
        for (int j = 0; j < kMaxDotCols; ++j) cols.push_back(make_dot_case(t, n, rng, quantized));
        for (const DotCase& c : cols) act.push_back(c.act.data());
        for (Isa isa : simd_isas()) {
          const TypeKernels* k = kernels_for(t, isa);
          if (!k || !k->vec_dot) continue;
          ++checked;
          const float want = x86_order_offset_dot(t, n, cols[0].w.data(), act[0]);
          const float got = k->vec_dot(n, cols[0].w.data(), act[0]);
          EXPECT_EQ(0, std::memcmp(&want, &got, sizeof(float)))
              << label(t, isa) << " n=" << n << ": " << got << " vs x86 order " << want;
          if (!k->vec_dot_cols) continue;
          std::vector<float> out(kMaxDotCols);
          for (int mc : {1, 3, kMaxDotCols}) {
            k->vec_dot_cols(n, cols[0].w.data(), act.data(), mc, out.data());
            for (int j = 0; j < mc; ++j) {
              const float ref = x86_order_offset_dot(t, n, cols[0].w.data(), act[j]);
              EXPECT_EQ(0, std::memcmp(&ref, &out[j], sizeof(float)))
                  << label(t, isa) << " n=" << n << " m=" << mc << " col " << j;
            }
          }
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no SIMD offset-format kernels";
}

// The float order of x86's plain-format dot (x86/legacy_avx2_dot.cpp),
// written out: four 8-lane fma accumulators over 32-element steps, 8-element
// steps into the first, ((0+1)+(2+3)), hsum's reduction, then a scalar fma tail.
float x86_order_plain_dot(GgmlType t, int64_t n, const void* w, const void* act) {
  auto at = [t](const void* p, int64_t i) {
    if (t == GgmlType::F32) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == GgmlType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
  };
  float acc[4][8] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 8; ++k)
        acc[c][k] = std::fma(at(w, i + 8 * c + k), at(act, i + 8 * c + k), acc[c][k]);
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[0][k] = std::fma(at(w, i + k), at(act, i + k), acc[0][k]);
  float v[8];
  for (int k = 0; k < 8; ++k) v[k] = (acc[0][k] + acc[1][k]) + (acc[2][k] + acc[3][k]);
  const float s0 = v[0] + v[4], s1 = v[1] + v[5], s2 = v[2] + v[6], s3 = v[3] + v[7];
  float sum = (s0 + s2) + (s1 + s3);
  for (; i < n; ++i) sum = std::fma(at(w, i), at(act, i), sum);
  return sum;
}

// F32, F16 and BF16 dots give the same bits on every SIMD ISA that has them
// (AVX2 on x86, NEON on AArch64): x86_order_plain_dot.
TEST(KernelsLegacy, PlainDotsFollowTheX86OrderOnEverySimdIsa) {
  if (cpu_features().neon) {
    for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
      ASSERT_NE(kernels_for(t, Isa::Neon), nullptr) << ggml_type_name(t);
  }
  std::mt19937 rng(16);
  int checked = 0;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    for (int64_t n : {1, 7, 8, 31, 33, 64, 100, 256, 1000, 4096}) {
      for (bool quantized : {true, false}) {
        const DotCase c = make_dot_case(t, n, rng, quantized);
        for (Isa isa : simd_isas()) {
          const TypeKernels* k = kernels_for(t, isa);
          if (!k || !k->vec_dot) continue;
          ++checked;
          const float want = x86_order_plain_dot(t, n, c.w.data(), c.act.data());
          const float got = k->vec_dot(n, c.w.data(), c.act.data());
          EXPECT_EQ(0, std::memcmp(&want, &got, sizeof(float)))
              << label(t, isa) << " n=" << n << ": " << got << " vs x86 order " << want;
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no SIMD plain-float dots";
}

}  // namespace
}  // namespace sluice::kernels
