// The packed (row-interleaved) layout of the AVX-512 VNNI entries (quant.h:
// pack_rows / packed_dot): out[j * out_stride + r] must be BIT-IDENTICAL to
// the same entry's vec_dot of plain row r against act[j], and to the AVX2
// vec_dot (every x86 machine computes the same logits), for every row length
// shape (one block, an odd block count, long rows) and column count; and
// packed_dot writes nothing but its outputs. Weights are raw random bytes with
// extreme block scales mixed in (fp16 largest / smallest normal / subnormal /
// zero / negative, every E8M0 exponent); activations come from the Q8_0
// quantizer (the engine's path), with blocks whose levels hit +-127.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

const GgmlType kPackedTypes[] = {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4};
const int64_t kRowLengths[] = {32, 64, 96, 2048, 768, 2880};

#define SKIP_WITHOUT_AVX512VNNI()                                                               \
  do {                                                                                          \
    if (!cpu_features().avx512vnni) {                                                           \
      GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/VNNI; the packed kernels are not run";    \
    }                                                                                           \
  } while (0)

size_t row_bytes(GgmlType t, int64_t n) { return static_cast<size_t>(*ggml_row_bytes(t, static_cast<uint64_t>(n))); }

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// A block scale: mostly ordinary, with the fp16 extremes mixed in.
uint16_t fp16_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> ordinary(-2.0f, 2.0f);
  switch (rng() % 8) {
    case 0: return rng() % 2 ? 0x7BFF : 0xFBFF;                              // +-65504
    case 1: return rng() % 2 ? 0x0400 : 0x8400;                              // +-smallest normal
    case 2: return static_cast<uint16_t>((rng() % 0x3FF + 1) | (rng() % 2 ? 0 : 0x8000));  // subnormal
    case 3: return 0;
    default: return fp32_to_fp16(ordinary(rng));
  }
}

// `rows` plain rows of t: random quant bytes (every level, Q8_0's -128
// included), some blocks all-lowest or all-highest levels, scales per
// fp16_scale (MXFP4: any exponent byte, 0, 1, 2, 254, 255 among them).
std::vector<uint8_t> weight_rows(GgmlType t, int64_t n, int rows, std::mt19937& rng) {
  std::vector<uint8_t> w(row_bytes(t, n) * rows);
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  const size_t bb = ggml_type_info(t).block_bytes;
  for (size_t off = 0; off < w.size(); off += bb) {
    uint8_t* blk = w.data() + off;
    const size_t scale_bytes = t == GgmlType::MXFP4 ? 1 : 2;
    const uint32_t pick = rng() % 16;
    if (pick == 0) std::memset(blk + scale_bytes, t == GgmlType::Q8_0 ? 0x80 : 0x00, bb - scale_bytes);
    if (pick == 1) std::memset(blk + scale_bytes, t == GgmlType::Q8_0 ? 0x7F : 0xFF, bb - scale_bytes);
    if (t == GgmlType::MXFP4) {
      const uint8_t extremes[] = {0, 1, 2, 254, 255, 127, 128};
      blk[0] = rng() % 4 == 0 ? extremes[rng() % 7] : static_cast<uint8_t>(110 + rng() % 36);
    } else {
      const uint16_t h = fp16_scale(rng);
      std::memcpy(blk, &h, 2);
    }
  }
  return w;
}

// One activation row quantized by the Q8_0 quantizer from floats with varied
// block shapes: Gaussian, all +-amax (every level +-127), zeros, tiny, huge.
std::vector<uint8_t> activation_row(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint32_t shape = rng() % 8;
    const float mag = shape == 4 ? 1e-6f : shape == 5 ? 3e4f : 1.0f;
    for (int k = 0; k < 32; ++k) {
      float v = gauss(rng) * mag;
      if (shape == 1) v = rng() % 2 ? 5.0f : -5.0f;  // every level +-127
      if (shape == 2) v = 0.0f;
      if (shape == 3) v = k == 0 ? -3.0f : v;        // one -127, the rest scaled down
      x[static_cast<size_t>(32 * b + k)] = v;
    }
  }
  std::vector<uint8_t> a(row_bytes(GgmlType::Q8_0, n));
  kernels_for(GgmlType::Q8_0).quantize(x.data(), a.data(), n);
  return a;
}

TEST(KernelsPacked, RegisteredWithTheVecDotOfTheirIsa) {
  if (!cpu_features().avx512vnni) {
    for (GgmlType t : kPackedTypes) {
      EXPECT_EQ(kernels_for(t).packed_dot, nullptr) << ggml_type_name(t);
      EXPECT_EQ(kernels_for(t).pack_rows, nullptr) << ggml_type_name(t);
    }
    GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/VNNI: checked only that no packed layout is offered";
  }
  for (GgmlType t : kPackedTypes) {
    const TypeKernels* k = kernels_for(t, Isa::Avx512Vnni);
    ASSERT_NE(k, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->vec_dot, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->vec_dot_cols, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->pack_rows, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->packed_dot, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->prepare_packed, nullptr) << ggml_type_name(t);
    EXPECT_NE(k->packed_dot_prepared, nullptr) << ggml_type_name(t);
    EXPECT_EQ(k->vec_dot_type, GgmlType::Q8_0) << ggml_type_name(t);
    // The default entry takes all six from this ISA together.
    const TypeKernels& best = kernels_for(t);
    EXPECT_EQ(best.vec_dot, k->vec_dot) << ggml_type_name(t);
    EXPECT_EQ(best.vec_dot_cols, k->vec_dot_cols) << ggml_type_name(t);
    EXPECT_EQ(best.pack_rows, k->pack_rows) << ggml_type_name(t);
    EXPECT_EQ(best.packed_dot, k->packed_dot) << ggml_type_name(t);
    EXPECT_EQ(best.prepare_packed, k->prepare_packed) << ggml_type_name(t);
    EXPECT_EQ(best.packed_dot_prepared, k->packed_dot_prepared) << ggml_type_name(t);
  }
}

// pack_rows fills exactly the 16 rows' byte count and packed_dot, for every
// column count, gives each row's vec_dot (this ISA's) bit for bit,
// leaving every other float of `out` as it was.
TEST(KernelsPacked, PackedDotIsBitIdenticalToVecDotOfThePlainRows) {
  SKIP_WITHOUT_AVX512VNNI();
  std::mt19937 rng(31337);
  constexpr int64_t kStride = kPackRows + 5;  // > kPackRows: gaps between the columns' outputs
  constexpr float kGuard = -7777.25f;
  for (GgmlType t : kPackedTypes) {
    const TypeKernels& k = *kernels_for(t, Isa::Avx512Vnni);
    for (int64_t n : kRowLengths) {
      const std::string what = std::string(ggml_type_name(t)) + " n=" + std::to_string(n);
      const size_t rb = row_bytes(t, n);
      const std::vector<uint8_t> plain = weight_rows(t, n, kPackRows, rng);
      std::vector<uint8_t> packed(plain.size() + 64, 0xA5);
      k.pack_rows(n, plain.data(), packed.data());
      for (size_t i = plain.size(); i < packed.size(); ++i)
        ASSERT_EQ(packed[i], 0xA5) << what << ": pack_rows wrote past the group";

      std::vector<std::vector<uint8_t>> act;
      std::vector<const void*> ptrs;
      for (int j = 0; j < kMaxDotCols; ++j) act.push_back(activation_row(n, rng));
      for (const auto& a : act) ptrs.push_back(a.data());
      // want[j][r]: this ISA's vec_dot (its rounding: kernels_legacy_test.cpp).
      float want[kMaxDotCols][kPackRows];
      for (int j = 0; j < kMaxDotCols; ++j)
        for (int r = 0; r < kPackRows; ++r) want[j][r] = k.vec_dot(n, plain.data() + r * rb, ptrs[j]);
      // The activations' prepared ints (once for all columns), for packed_dot_prepared.
      std::vector<int32_t> prepared(static_cast<size_t>(kMaxDotCols * packed_prepared_ints(n)), -1);
      k.prepare_packed(n, ptrs.data(), kMaxDotCols, prepared.data());
      for (int m = 1; m <= kMaxDotCols; ++m) {
        for (bool with_prepared : {false, true}) {
          std::vector<float> out(static_cast<size_t>(kStride * (kMaxDotCols + 1)), kGuard);
          if (with_prepared) {
            k.packed_dot_prepared(n, packed.data(), ptrs.data(), prepared.data(), m, out.data(), kStride);
          } else {
            k.packed_dot(n, packed.data(), ptrs.data(), m, out.data(), kStride);
          }
          const char* how = with_prepared ? " packed_dot_prepared" : " packed_dot";
          for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
            const int64_t j = i / kStride, r = i % kStride;
            if (j < m && r < kPackRows) {
              EXPECT_TRUE(same_bits(out[i], want[j][r])) << what << how << " n_act=" << m << " row " << r << " col "
                                                         << j << ": " << out[i] << " vec_dot " << want[j][r];
            } else {
              EXPECT_TRUE(same_bits(out[i], kGuard)) << what << how << " n_act=" << m << ": wrote out[" << i << "]";
            }
          }
        }
        // The multi-column dot of the same entry agrees too (row 0 and 15).
        for (int r : {0, kPackRows - 1}) {
          float cols[kMaxDotCols];
          k.vec_dot_cols(n, plain.data() + r * rb, ptrs.data(), m, cols);
          for (int j = 0; j < m; ++j)
            EXPECT_TRUE(same_bits(cols[j], want[j][r])) << what << " n_act=" << m << " vec_dot_cols row " << r;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::kernels

// This file's macros end with it (tests/CMakeLists.txt: unity build).
#undef SKIP_WITHOUT_AVX512VNNI
