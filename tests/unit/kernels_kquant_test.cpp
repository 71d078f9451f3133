// K-quant kernels: hand-built blocks with values worked out from the format
// definitions, SIMD-vs-scalar and scalar-vs-double dot products, and
// quantization error bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <random>
#include <stdexcept>
#include <vector>

#include "gguf/gguf.h"
#include "test_support.h"
#include "kernels/blocks_kquant.h"
#include "kernels/quant.h"
#include "kernels_test_support.h"
#include "util/fp16.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

const TypeKernels& scalar_kernels(GgmlType t) {
  const TypeKernels* k = kernels_for(t, Isa::Scalar);
  if (!k) throw std::runtime_error("no scalar kernels");
  return *k;
}

template <typename Block>
std::vector<float> dequantize_one(GgmlType t, const Block& b) {
  std::vector<float> out(kQK_K);
  scalar_kernels(t).dequantize(&b, out.data(), kQK_K);
  return out;
}

// ---------------------------------------------------------------------------
// Hand-built blocks
// ---------------------------------------------------------------------------

// Sub-block scales {1,2,3,4,37,46,59,63} and mins {0,5,10,15,20,33,48,62},
// packed by hand: bytes 0-3 scale[j] | (scale[j+4]>>4)<<6, bytes 4-7
// min[j] | (min[j+4]>>4)<<6, bytes 8-11 (scale[j+4]&15) | (min[j+4]&15)<<4.
constexpr uint8_t kK4PackedScales[12] = {0x81, 0x82, 0xC3, 0xC4, 0x40, 0x85, 0xCA, 0xCF, 0x45, 0x1E, 0x0B, 0xEF};

TEST(KquantDequant, Q4KUnpacksSixBitScalesOfAllSubBlocks) {
  BlockQ4K b{};
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(0.5f);
  std::memcpy(b.scales, kK4PackedScales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i);  // low nibble i&15, high nibble i>>4
  const std::vector<float> y = dequantize_one(GgmlType::Q4_K, b);
  // element: sub-block, quant source -> d*sc*q - dmin*m
  EXPECT_EQ(y[5], 5.0f);      // sb0: qs[5] lo=5: 1*5 - 0
  EXPECT_EQ(y[39], -2.5f);    // sb1: qs[7] hi=0: 0 - 0.5*5
  EXPECT_EQ(y[84], 7.0f);     // sb2: qs[52] lo=4: 3*4 - 0.5*10
  EXPECT_EQ(y[99], 0.5f);     // sb3: qs[35] hi=2: 4*2 - 0.5*15
  EXPECT_EQ(y[138], 360.0f);  // sb4: qs[74] lo=10: 37*10 - 0.5*20
  EXPECT_EQ(y[191], 213.5f);  // sb5: qs[95] hi=5: 46*5 - 0.5*33
  EXPECT_EQ(y[193], 35.0f);   // sb6: qs[97] lo=1: 59*1 - 0.5*48
  EXPECT_EQ(y[255], 410.0f);  // sb7: qs[127] hi=7: 63*7 - 0.5*62
}

TEST(KquantDequant, Q5KAddsFifthBitFromQh) {
  BlockQ5K b{};
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(0.5f);
  std::memcpy(b.scales, kK4PackedScales, 12);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>(i);
  b.qh[5] = 0x01;   // bit 0: chunk 0 low nibbles -> element 5
  b.qh[10] = 0x10;  // bit 4: chunk 2 low nibbles -> element 138
  b.qh[31] = 0x80;  // bit 7: chunk 3 high nibbles -> element 255
  const std::vector<float> y = dequantize_one(GgmlType::Q5_K, b);
  EXPECT_EQ(y[5], 21.0f);      // 1*(5+16)
  EXPECT_EQ(y[39], -2.5f);     // no high bit
  EXPECT_EQ(y[138], 952.0f);   // 37*(10+16) - 10
  EXPECT_EQ(y[191], 213.5f);   // qh[31] bit 3 clear
  EXPECT_EQ(y[255], 1418.0f);  // 63*(7+16) - 31
}

TEST(KquantDequant, Q2KNibbleScalesAndTwoBitQuants) {
  BlockQ2K b{};
  b.d = fp32_to_fp16(0.5f);
  b.dmin = fp32_to_fp16(0.25f);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(j | ((15 - j) << 4));  // scale j, min 15-j
  std::memset(b.qs, 0xE4, sizeof b.qs);  // bits 0-1:0, 2-3:1, 4-5:2, 6-7:3 -> quant = (e%128)/32
  b.qs[63] = 0x64;                       // bits: 0, 1, 2, 1
  const std::vector<float> y = dequantize_one(GgmlType::Q2_K, b);
  EXPECT_EQ(y[0], -3.75f);   // sb0: 0.5*0*0 - 0.25*15
  EXPECT_EQ(y[40], -2.25f);  // sb2: 0.5*2*1 - 0.25*13
  EXPECT_EQ(y[100], 6.75f);  // sb6: 0.5*6*3 - 0.25*9
  EXPECT_EQ(y[200], 11.25f); // sb12: 0.5*12*2 - 0.25*3
  EXPECT_EQ(y[223], 12.5f);  // sb13, qs[63] bits 4-5 = 2: 0.5*13*2 - 0.25*2
  EXPECT_EQ(y[255], 7.5f);   // sb15, qs[63] bits 6-7 = 1: 0.5*15*1 - 0
}

TEST(KquantDequant, Q3KScalePackingAndHmask) {
  BlockQ3K b{};
  b.d = fp32_to_fp16(0.5f);
  // Biased 6-bit scales {0,1,2,3,16,17,31,32,33,47,48,50,60,61,62,63} (signed: minus 32),
  // packed by hand: bytes 0-7 low nibbles of j (low) and j+8 (high); bytes 8-11
  // hold the top 2 bits of j = k, k+4, k+8, k+12 at bits 0, 2, 4, 6.
  const uint8_t packed[12] = {0x10, 0xF1, 0x02, 0x23, 0xC0, 0xD1, 0xEF, 0xF0, 0xE4, 0xE4, 0xF4, 0xF8};
  std::memcpy(b.scales, packed, 12);
  std::memset(b.qs, 0xE4, sizeof b.qs);  // low 2 bits = (e%128)/32
  b.hmask[3] = 0x02;   // bit 1 -> element 32*1 + 3 = 35
  b.hmask[20] = 0x40;  // bit 6 -> element 32*6 + 20 = 212
  const std::vector<float> y = dequantize_one(GgmlType::Q3_K, b);
  EXPECT_EQ(y[3], 64.0f);     // sb0 scale -32, q = 0 - 4
  EXPECT_EQ(y[35], -15.0f);   // sb2 scale -30, q = 1 (high bit set)
  EXPECT_EQ(y[36], 45.0f);    // sb2 scale -30, q = 1 - 4
  EXPECT_EQ(y[111], 0.5f);    // sb6 scale -1, q = 3 - 4
  EXPECT_EQ(y[144], -30.0f);  // sb9 scale 15, q = 0 - 4
  EXPECT_EQ(y[170], -24.0f);  // sb10 scale 16, q = 1 - 4
  EXPECT_EQ(y[212], 29.0f);   // sb13 scale 29, q = 2 (high bit set)
  EXPECT_EQ(y[213], -29.0f);  // sb13 scale 29, q = 2 - 4
  EXPECT_EQ(y[255], -15.5f);  // sb15 scale 31, q = 3 - 4
}

TEST(KquantDequant, Q6KSplitsLowAndHighBits) {
  BlockQ6K b{};
  b.d = fp32_to_fp16(0.25f);
  const int8_t scales[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 127, -128};
  std::memcpy(b.scales, scales, 16);
  b.ql[0] = 0x5A;       // element 0 low nibble 10, element 64 low nibble 5
  b.qh[0] = 0xE4;       // high bits: element 0 -> 0, 32 -> 1, 64 -> 2, 96 -> 3
  b.ql[64 + 31] = 0xF7; // second half, l = 31: element 159 low 7, element 223 low 15
  b.qh[32 + 31] = 0xFF;
  const std::vector<float> y = dequantize_one(GgmlType::Q6_K, b);
  EXPECT_EQ(y[0], -5.5f);      // 0.25 * 1 * (10 - 32)
  EXPECT_EQ(y[32], -12.0f);    // 0.25 * 3 * (16 - 32)
  EXPECT_EQ(y[64], 6.25f);     // 0.25 * 5 * (37 - 32)
  EXPECT_EQ(y[96], 28.0f);     // 0.25 * 7 * (48 - 32)
  EXPECT_EQ(y[1], -8.0f);      // 0.25 * 1 * (0 - 32)
  EXPECT_EQ(y[159], -57.5f);   // 0.25 * -10 * (55 - 32)
  EXPECT_EQ(y[223], -108.5f);  // 0.25 * -14 * (63 - 32)
  EXPECT_EQ(y[224], -1016.0f); // 0.25 * 127 * (0 - 32)
  EXPECT_EQ(y[241], 1024.0f);  // 0.25 * -128 * (0 - 32)
}

TEST(KquantDequant, Iq4XsSplitScalesAndNonLinearLevels) {
  BlockIq4Xs b{};
  b.d = fp32_to_fp16(0.5f);
  // Biased scales per sub-block {0,1,31,32,33,47,48,63} -> signed {-32,-31,-1,0,1,15,16,31}.
  const uint8_t scales_l[4] = {0x10, 0x0F, 0xF1, 0xF0};
  std::memcpy(b.scales_l, scales_l, 4);
  b.scales_h = 0xFA90;  // top bits {0,0,1,2,2,2,3,3} at 2*ib
  b.qs[0] = 0xF8;       // element 0 -> level 8 (1), element 16 -> level 15 (113)
  b.qs[32 + 5] = 0x37;  // element 69 -> level 7 (-10), element 85 -> level 3 (-65)
  const std::vector<float> y = dequantize_one(GgmlType::IQ4_XS, b);
  EXPECT_EQ(y[0], -16.0f);     // 0.5 * -32 * 1
  EXPECT_EQ(y[16], -1808.0f);  // 0.5 * -32 * 113
  EXPECT_EQ(y[33], 1968.5f);   // sb1: 0.5 * -31 * -127
  EXPECT_EQ(y[69], 5.0f);      // 0.5 * -1 * -10
  EXPECT_EQ(y[85], 32.5f);     // 0.5 * -1 * -65
  EXPECT_EQ(y[100], 0.0f);     // sb3 scale 0
  EXPECT_EQ(y[160], -952.5f);  // 0.5 * 15 * -127
  EXPECT_EQ(y[200], -1016.0f); // sb6: 0.5 * 16 * -127
  EXPECT_EQ(y[255], -1968.5f); // 0.5 * 31 * -127
}

TEST(KquantDequant, Q8KIsScaleTimesQuant) {
  BlockQ8K b{};
  b.d = 0.5f;
  for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(j - 128);
  const std::vector<float> y = dequantize_one(GgmlType::Q8_K, b);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[128], 0.0f);
  EXPECT_EQ(y[255], 63.5f);
}

// ---------------------------------------------------------------------------
// Q8_K quantization: must match ggml's quantize_row_q8_K_ref bit for bit.
// ---------------------------------------------------------------------------

TEST(KquantQuantize, Q8KScalesByLargestMagnitudeAndFillsBsums) {
  std::vector<float> x(2 * kQK_K, 0.0f);
  // Block 0: largest magnitude 4 appears first as -4, so iscale = -127/-4 = 31.75.
  x[3] = -4.0f;
  x[17] = 1.0f;    // 31.75 -> 32
  x[40] = 0.1f;    // 3.175 -> 3
  x[100] = 4.0f;   // 127
  // Block 1: max -127 gives iscale 1, exposing round-half-to-even.
  float* x1 = x.data() + kQK_K;
  x1[0] = -127.0f;
  x1[1] = 2.5f;
  x1[2] = 3.5f;
  x1[3] = -0.5f;
  x1[4] = 126.9f;
  x1[5] = 127.0f;
  BlockQ8K out[2];
  std::memset(out, 0x55, sizeof out);
  scalar_kernels(GgmlType::Q8_K).quantize(x.data(), out, 2 * kQK_K);
  EXPECT_EQ(out[0].d, 1.0f / 31.75f);
  EXPECT_EQ(out[0].qs[3], -127);
  EXPECT_EQ(out[0].qs[17], 32);
  EXPECT_EQ(out[0].qs[40], 3);
  EXPECT_EQ(out[0].qs[100], 127);
  EXPECT_EQ(out[0].qs[0], 0);
  EXPECT_EQ(out[0].bsums[0], -127);
  EXPECT_EQ(out[0].bsums[1], 32);
  EXPECT_EQ(out[0].bsums[2], 3);
  EXPECT_EQ(out[0].bsums[6], 127);
  EXPECT_EQ(out[0].bsums[7], 0);
  EXPECT_EQ(out[1].d, 1.0f);
  EXPECT_EQ(out[1].qs[0], -127);
  EXPECT_EQ(out[1].qs[1], 2);
  EXPECT_EQ(out[1].qs[2], 4);
  EXPECT_EQ(out[1].qs[3], 0);
  EXPECT_EQ(out[1].qs[4], 127);
  EXPECT_EQ(out[1].qs[5], 127);
  EXPECT_EQ(out[1].bsums[0], -127 + 2 + 4 + 127 + 127);
}

TEST(KquantQuantize, Q8KAllZeroBlockIsZero) {
  std::vector<float> x(kQK_K, 0.0f);
  BlockQ8K out;
  std::memset(&out, 0x55, sizeof out);
  scalar_kernels(GgmlType::Q8_K).quantize(x.data(), &out, kQK_K);
  EXPECT_EQ(out.d, 0.0f);
  for (int j = 0; j < kQK_K; ++j) ASSERT_EQ(out.qs[j], 0);
  for (int j = 0; j < 16; ++j) ASSERT_EQ(out.bsums[j], 0);
}

// Every SIMD Q8_K quantizer against the scalar one, byte for byte: Gaussian
// rows, ties of +m and -m (the first one sets the sign), all-zero and -0
// blocks, exact .5 rounding cases, huge and subnormal magnitudes, and NaN /
// infinity (garbage out, but the same garbage).
TEST(KquantQuantize, Q8KSimdQuantizeIsBitIdenticalToScalar) {
  constexpr int kBlocks = 12;
  std::vector<float> x(kBlocks * kQK_K);
  std::mt19937 rng(99);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  float* b = x.data();
  // Block 1: +3 at 7 and -3 at 5 (first wins: -3); block 2: -3 first, +3 later.
  b[kQK_K + 7] = 3.0f, b[kQK_K + 5] = -3.0f;
  b[2 * kQK_K + 9] = -3.0f, b[2 * kQK_K + 200] = 3.0f;
  // Block 3: all zero; block 4: all -0.
  std::fill(b + 3 * kQK_K, b + 4 * kQK_K, 0.0f);
  std::fill(b + 4 * kQK_K, b + 5 * kQK_K, -0.0f);
  // Block 5: max -127 (iscale 1): halves round to even.
  for (int j = 0; j < kQK_K; ++j) b[5 * kQK_K + j] = (j % 2 ? -0.5f : 0.5f) + static_cast<float>(j % 100 - 50);
  b[5 * kQK_K] = -127.0f;
  // Block 6: huge, block 7: subnormal magnitudes.
  for (int j = 0; j < kQK_K; ++j) b[6 * kQK_K + j] *= 1e37f, b[7 * kQK_K + j] *= 1e-40f;
  // Block 8: a NaN; block 9: +inf; block 10: -inf and a NaN. Block 11: one nonzero.
  b[8 * kQK_K + 17] = std::nanf("");
  b[9 * kQK_K + 100] = INFINITY;
  b[10 * kQK_K + 3] = -INFINITY, b[10 * kQK_K + 4] = std::nanf("");
  std::fill(b + 11 * kQK_K, b + 12 * kQK_K, 0.0f);
  b[11 * kQK_K + 255] = -1e-3f;

  std::vector<BlockQ8K> want(kBlocks);
  scalar_kernels(GgmlType::Q8_K).quantize(x.data(), want.data(), kBlocks * kQK_K);
  int checked = 0;
  for (int isa = 1; isa < kIsaCount; ++isa) {
    const TypeKernels* k = kernels_for(GgmlType::Q8_K, static_cast<Isa>(isa));
    if (!k || !k->quantize) continue;
    ++checked;
    std::vector<BlockQ8K> got(kBlocks);
    std::memset(got.data(), 0x55, got.size() * sizeof(BlockQ8K));
    k->quantize(x.data(), got.data(), kBlocks * kQK_K);
    for (int blk = 0; blk < kBlocks; ++blk)
      EXPECT_EQ(0, std::memcmp(&got[blk], &want[blk], sizeof(BlockQ8K)))
          << isa_name(static_cast<Isa>(isa)) << " block " << blk << ": d " << got[blk].d << " vs " << want[blk].d;
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD Q8_K quantizer on this CPU";
  // The default (used by matmul) is one of those checked, or the scalar one.
  std::vector<BlockQ8K> dflt(kBlocks);
  kernels_for(GgmlType::Q8_K).quantize(x.data(), dflt.data(), kBlocks * kQK_K);
  EXPECT_EQ(0, std::memcmp(dflt.data(), want.data(), dflt.size() * sizeof(BlockQ8K)));
}

// ---------------------------------------------------------------------------
// Random data helpers
// ---------------------------------------------------------------------------

const GgmlType kWeightTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                 GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

size_t block_bytes(GgmlType t) { return ggml_type_info(t).block_bytes; }

// A row of random weight blocks: every bit of scales and quants random, the
// fp16 super-scales set to finite values of either sign.
std::vector<uint8_t> random_weight_row(GgmlType t, int64_t n, std::mt19937& rng) {
  const int64_t nb = n / kQK_K;
  std::vector<uint8_t> row(static_cast<size_t>(nb) * block_bytes(t));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& v : row) v = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::bernoulli_distribution negative(0.3);
  auto half = [&] { return fp32_to_fp16(negative(rng) ? -scale(rng) : scale(rng)); };
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = row.data() + i * block_bytes(t);
    uint16_t d = half(), dmin = half();
    switch (t) {
      case GgmlType::Q2_K: std::memcpy(blk + 80, &d, 2); std::memcpy(blk + 82, &dmin, 2); break;
      case GgmlType::Q3_K: std::memcpy(blk + 108, &d, 2); break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K: std::memcpy(blk, &d, 2); std::memcpy(blk + 2, &dmin, 2); break;
      case GgmlType::Q6_K: std::memcpy(blk + 208, &d, 2); break;
      case GgmlType::IQ4_XS: std::memcpy(blk, &d, 2); break;
      default: break;
    }
  }
  return row;
}

// Q8_K activations with quants uniform over the full legal range [-127, 127].
std::vector<BlockQ8K> random_activation_row(int64_t n, std::mt19937& rng) {
  std::vector<BlockQ8K> row(static_cast<size_t>(n / kQK_K));
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> d(0.001f, 0.02f);
  for (auto& b : row) {
    b.d = d(rng);
    for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(q(rng));
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b.qs[16 * g + l];
      b.bsums[g] = static_cast<int16_t>(s);
    }
  }
  return row;
}

struct DoubleDot {
  double value = 0;
  double abs_sum = 0;  // sum |w_i * a_i|: the scale rounding errors are relative to
};

DoubleDot dequantized_dot(GgmlType t, const void* w, const std::vector<BlockQ8K>& a, int64_t n) {
  std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
  scalar_kernels(t).dequantize(w, wf.data(), n);
  scalar_kernels(GgmlType::Q8_K).dequantize(a.data(), af.data(), n);
  DoubleDot r;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(wf[i]) * static_cast<double>(af[i]);
    r.value += p;
    r.abs_sum += std::fabs(p);
  }
  return r;
}

// Float accumulation over per-block terms: allow 1e-5 of the absolute sum
// (single precision has 6e-8 relative rounding; a row has at most 32 blocks
// and a handful of operations per block).
constexpr double kDotRelTol = 1e-5;

const int64_t kRowLengths[] = {256, 512, 1280, 4096, 8192};

// ---------------------------------------------------------------------------
// vec_dot
// ---------------------------------------------------------------------------

TEST(KquantVecDot, RegistryDescribesKquantTypes) {
  for (GgmlType t : kWeightTypes) {
    EXPECT_TRUE(is_supported(t)) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_type, GgmlType::Q8_K) << ggml_type_name(t);
    EXPECT_NE(kernels_for(t).quantize, nullptr) << ggml_type_name(t);
  }
  EXPECT_FALSE(is_supported(GgmlType::Q8_K));  // activation-only
  EXPECT_NE(kernels_for(GgmlType::Q8_K).quantize, nullptr);
  EXPECT_NE(kernels_for(GgmlType::Q8_K).dequantize, nullptr);
  EXPECT_EQ(kernels_for(GgmlType::Q8_K).vec_dot, nullptr);
}

TEST(KquantVecDot, ScalarMatchesDoubleDotOfDequantizedRows) {
  std::mt19937 rng(1234);
  for (GgmlType t : kWeightTypes) {
    for (int64_t n : kRowLengths) {
      const std::vector<uint8_t> w = random_weight_row(t, n, rng);
      const std::vector<BlockQ8K> a = random_activation_row(n, rng);
      const DoubleDot ref = dequantized_dot(t, w.data(), a, n);
      const float got = scalar_kernels(t).vec_dot(n, w.data(), a.data());
      EXPECT_NEAR(got, ref.value, kDotRelTol * ref.abs_sum) << ggml_type_name(t) << " n=" << n;
    }
  }
}

TEST(KquantVecDot, EveryIsaMatchesScalarReference) {
  std::mt19937 rng(99);
  int simd_checked = 0;
  for (GgmlType t : kWeightTypes) {
    for (Isa isa : simd_isas()) {
      const TypeKernels* k = kernels_for(t, isa);
      if (!k || !k->vec_dot) continue;
      ++simd_checked;
      for (int64_t n : kRowLengths) {
        for (int rep = 0; rep < 3; ++rep) {
          const std::vector<uint8_t> w = random_weight_row(t, n, rng);
          const std::vector<BlockQ8K> a = random_activation_row(n, rng);
          const DoubleDot ref = dequantized_dot(t, w.data(), a, n);
          const float want = scalar_kernels(t).vec_dot(n, w.data(), a.data());
          const float got = k->vec_dot(n, w.data(), a.data());
          EXPECT_NEAR(got, want, kDotRelTol * ref.abs_sum)
              << ggml_type_name(t) << " " << isa_name(isa) << " n=" << n;
        }
      }
    }
  }
  if (simd_checked == 0) GTEST_SKIP() << "this CPU runs no SIMD K-quant kernels; only scalar is tested";
}

// Weight bytes all 0xFF (largest quants of every type) or all 0x00 (IQ4_XS's
// largest-magnitude level -127) against +-127 activations: the SIMD int16
// intermediate sums must not saturate.
TEST(KquantVecDot, ExtremeValuesDoNotSaturate) {
  const int64_t n = 512;
  for (GgmlType t : kWeightTypes) {
    for (uint8_t fill : {uint8_t{0xFF}, uint8_t{0x00}}) {
      std::mt19937 rng(7);
      std::vector<uint8_t> w = random_weight_row(t, n, rng);
      for (size_t i = 0; i < w.size(); ++i) {  // keep the random finite d/dmin
        const size_t off = i % block_bytes(t);
        const bool is_super_scale =
            (t == GgmlType::Q2_K && off >= 80) || (t == GgmlType::Q3_K && off >= 108) ||
            ((t == GgmlType::Q4_K || t == GgmlType::Q5_K) && off < 4) || (t == GgmlType::Q6_K && off >= 208) ||
            (t == GgmlType::IQ4_XS && off < 2);
        if (!is_super_scale) w[i] = fill;
      }
      for (int sign : {1, -1}) {
        std::vector<BlockQ8K> a(n / kQK_K);
        for (auto& b : a) {
          b.d = 0.01f;
          for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(127 * sign);
          for (int g = 0; g < 16; ++g) b.bsums[g] = static_cast<int16_t>(16 * 127 * sign);
        }
        const DoubleDot ref = dequantized_dot(t, w.data(), a, n);
        for (int i = 0; i < kIsaCount; ++i) {
          const Isa isa = static_cast<Isa>(i);
          const TypeKernels* k = kernels_for(t, isa);
          if (!k || !k->vec_dot) continue;
          EXPECT_NEAR(k->vec_dot(n, w.data(), a.data()), ref.value, kDotRelTol * ref.abs_sum)
              << ggml_type_name(t) << " " << isa_name(isa) << " fill " << int(fill) << " sign " << sign;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Quantization quality
// ---------------------------------------------------------------------------

double relative_rmse(GgmlType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = gauss(rng);
  std::vector<uint8_t> q(*ggml_row_bytes(t, static_cast<uint64_t>(n)));
  const TypeKernels& k = scalar_kernels(t);
  k.quantize(x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  k.dequantize(q.data(), y.data(), n);
  double err = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    var += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / var);
}

// Bounds: rmse/std on N(0,1) data, measured value in the comment, set with margin.
TEST(KquantQuantize, RoundTripErrorOnGaussianData) {
  const int64_t n = 256 * 64;
  struct Case { GgmlType t; double bound; };
  const Case cases[] = {
      {GgmlType::Q8_K, 0.009},   // measured 0.0068 (step max/127 on 256 samples)
      {GgmlType::Q6_K, 0.022},   // measured 0.0176
      {GgmlType::Q5_K, 0.045},   // measured 0.0361
      {GgmlType::Q4_K, 0.09},    // measured 0.0712
      {GgmlType::IQ4_XS, 0.095}, // measured 0.0767 (x^2-weighted fit, no imatrix)
      {GgmlType::Q3_K, 0.18},    // measured 0.151
      {GgmlType::Q2_K, 0.34},    // measured 0.297
  };
  for (const Case& c : cases) {
    const double r = relative_rmse(c.t, n, 42);
    EXPECT_LT(r, c.bound) << ggml_type_name(c.t);
    EXPECT_GT(r, 0.0) << ggml_type_name(c.t);
  }
}

// Quantizing what a Q8_K block dequantizes to reproduces its quants up to a
// global sign (d carries the sign of the first largest-magnitude element,
// which may flip when two elements tie at |q| = 127), and its values.
TEST(KquantQuantize, Q8KIsStableOnItsOwnOutput) {
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.0f, 3.0f);
  const int64_t n = 1024;
  std::vector<float> x(n);
  for (auto& v : x) v = gauss(rng);
  std::vector<BlockQ8K> a(n / kQK_K), b(n / kQK_K);
  const TypeKernels& k = scalar_kernels(GgmlType::Q8_K);
  k.quantize(x.data(), a.data(), n);
  std::vector<float> y(n), z(n);
  k.dequantize(a.data(), y.data(), n);
  k.quantize(y.data(), b.data(), n);
  k.dequantize(b.data(), z.data(), n);
  for (size_t i = 0; i < a.size(); ++i) {
    const int sign = (a[i].d > 0) == (b[i].d > 0) ? 1 : -1;
    for (int j = 0; j < kQK_K; ++j) ASSERT_EQ(b[i].qs[j], sign * a[i].qs[j]) << "block " << i << " j " << j;
    for (int g = 0; g < 16; ++g) ASSERT_EQ(b[i].bsums[g], sign * a[i].bsums[g]) << "block " << i;
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(z[i], y[i], 1e-6 * std::fabs(a[i / kQK_K].d) * 127);
}

// Constant and all-zero input quantize to exactly representable blocks.
TEST(KquantQuantize, ZeroRowsStayZero) {
  const int64_t n = 512;
  std::vector<float> x(n, 0.0f), y(n, 1.0f);
  for (GgmlType t : kWeightTypes) {
    std::vector<uint8_t> q(*ggml_row_bytes(t, n), 0xAB);
    scalar_kernels(t).quantize(x.data(), q.data(), n);
    scalar_kernels(t).dequantize(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << ggml_type_name(t) << " i=" << i;
  }
}

// Quantize -> vec_dot against Q8_K activations approximates the float dot.
TEST(KquantQuantize, QuantizedDotTracksFloatDot) {
  const int64_t n = 4096;
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> w(n), x(n);
  for (auto& v : w) v = gauss(rng);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * w[i] + gauss(rng);  // correlated, so the dot is large
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) exact += static_cast<double>(w[i]) * x[i];
  std::vector<BlockQ8K> a(n / kQK_K);
  kernels_for(GgmlType::Q8_K).quantize(x.data(), a.data(), n);
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> q(*ggml_row_bytes(t, n));
    kernels_for(t).quantize(w.data(), q.data(), n);
    const float got = kernels_for(t).vec_dot(n, q.data(), a.data());
    EXPECT_NEAR(got, exact, 0.03 * std::fabs(exact)) << ggml_type_name(t);
  }
}

// ---------------------------------------------------------------------------
// Byte-exact agreement with llama.cpp's llama-quantize
// ---------------------------------------------------------------------------
// The golden qwen3moe cases were quantized by llama-quantize (no imatrix, so
// ggml's reference quantizers) from the F32 master qwen3moe-f32.gguf. Our
// quantizers must reproduce those bytes exactly.

#ifdef SLUICE_SHARED_DIR
TEST(KquantQuantize, MatchesLlamaQuantizeByteForByte) {
  const std::string dir = test::shared_path("golden/");
  const std::string master_path = dir + "qwen3moe-f32.gguf";
  if (!std::ifstream(master_path) || !std::ifstream(dir + "qwen3moe-kquants.gguf") ||
      !std::ifstream(dir + "qwen3moe-mixed.gguf"))
    GTEST_SKIP() << "golden qwen3moe GGUFs not found under " << dir;
  const auto master = gguf::GgufModel::open(master_path);
  std::map<GgmlType, int> tensors_checked;
  for (const char* quantized : {"qwen3moe-kquants.gguf", "qwen3moe-mixed.gguf"}) {
    const auto q = gguf::GgufModel::open(dir + quantized);
    for (const gguf::TensorInfo& t : q.tensors()) {
      const std::string& name = t.name;
      const GgmlType type = t.type;
      bool is_kquant = false;
      for (GgmlType k : kWeightTypes) is_kquant |= k == type;
      if (!is_kquant) continue;
      const gguf::TensorInfo* m = master.find(name);
      ASSERT_NE(m, nullptr) << name;
      ASSERT_EQ(m->type, GgmlType::F32) << name << " is not F32 in the master";
      ASSERT_EQ(m->n_elements(), t.n_elements()) << name;
      const uint64_t n = t.n_elements();
      const uint64_t qbytes = *ggml_row_bytes(type, n);
      ASSERT_EQ(qbytes, t.bytes) << name;
      std::vector<float> src(n);
      const std::vector<uint8_t> master_bytes = test::read_tensor_bytes(master, *m);
      std::memcpy(src.data(), master_bytes.data(), 4 * n);
      std::vector<uint8_t> ours(qbytes);
      scalar_kernels(type).quantize(src.data(), ours.data(), static_cast<int64_t>(n));
      const std::vector<uint8_t> q_bytes = test::read_tensor_bytes(q, t);
      const uint8_t* theirs = q_bytes.data();
      const size_t bb = block_bytes(type);
      size_t bad_blocks = 0, first_bad = 0;
      for (size_t b = 0; b < qbytes / bb; ++b)
        if (std::memcmp(ours.data() + b * bb, theirs + b * bb, bb) != 0 && bad_blocks++ == 0) first_bad = b;
      EXPECT_EQ(bad_blocks, 0u) << name << " (" << ggml_type_name(type) << "): " << bad_blocks << " of "
                                << qbytes / bb << " blocks differ, first " << first_bad;
      ++tensors_checked[type];
    }
  }
  for (GgmlType k : kWeightTypes) EXPECT_GT(tensors_checked[k], 0) << "no golden tensor of type " << ggml_type_name(k);
}
#endif

}  // namespace
}  // namespace sluice::kernels
