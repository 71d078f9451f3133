// AVX-VNNI and AVX-512 VNNI kernels: CPU detection, registration, and the
// bit-identity contract with the AVX2 kernels (quant.h: a VNNI machine and an
// AVX2-only machine must produce the same bits). Blocks are raw random bytes (every quant value, every
// packed scale pattern) plus extreme fills: largest / smallest quants, largest
// scales, activations all +127 or all -128. Every comparison is memcmp on the
// float.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/blocks_kquant.h"
#include "kernels/blocks_legacy.h"
#include "kernels/quant.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

// Weight types with an AVX-VNNI vec_dot, and those that also have a
// multi-column one.
const GgmlType kVnniDotTypes[] = {GgmlType::Q4_0,  GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL,
                                  GgmlType::MXFP4, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q4_K,
                                  GgmlType::Q5_K,  GgmlType::Q6_K};
const GgmlType kVnniColsTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K,
                                   GgmlType::Q6_K};
// Weight types with AVX-512 VNNI kernels (vec_dot and 8-column vec_dot_cols):
// the K-quants and the symmetric legacy formats (whose packed layout
// kernels_packed_test.cpp checks). The K-quants give the AVX2 bits; the
// legacy formats round their own way (quant.h; kernels_legacy_test.cpp
// checks that order).
const GgmlType kAvx512Types[] = {GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,  GgmlType::Q4_0,
                                 GgmlType::Q5_0, GgmlType::Q8_0,   GgmlType::IQ4_NL, GgmlType::MXFP4};
const GgmlType kAvx512Avx2BitsTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

bool has_vnni() { return cpu_features().avxvnni; }
#define SKIP_WITHOUT_VNNI()                                                                 \
  do {                                                                                      \
    if (!has_vnni()) {                                                                      \
      GTEST_SKIP() << "this CPU lacks AVX-VNNI (CPUID.(7,1):EAX[4]); VNNI kernels not run"; \
    }                                                                                       \
  } while (0)

bool has_avx512vnni() { return cpu_features().avx512vnni; }
#define SKIP_WITHOUT_AVX512VNNI()                                                              \
  do {                                                                                         \
    if (!has_avx512vnni()) {                                                                   \
      GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/VNNI; AVX-512 VNNI kernels not run";    \
    }                                                                                          \
  } while (0)

// The ISA whose entry kernels_for(t) uses: the highest with a vec_dot for t.
Isa default_isa_of(GgmlType t) {
  for (Isa isa : {Isa::Amx, Isa::Avx512Vnni, Isa::AvxVnni, Isa::Avx2}) {
    const TypeKernels* k = kernels_for(t, isa);
    if (k && k->vec_dot) return isa;
  }
  return Isa::Scalar;
}

bool is_kquant(GgmlType t) {
  return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

size_t row_bytes(GgmlType t, int64_t n) {
  return static_cast<size_t>(*ggml_row_bytes(t, static_cast<uint64_t>(n)));
}

// How quant bytes (not block scales) are filled.
enum class Fill { Random, AllOnes, AllZeros };
// How activation quants are filled.
enum class ActFill { Random, Max, Min };

void put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// A weight row of type t: quant bytes per `fill`, block scale fields finite
// (random magnitudes; `max_scales` makes the packed sub-block scales of the
// K-quants their largest values: 63 for Q4_K/Q5_K, +-127/-128 for Q6_K).
std::vector<uint8_t> weight_row(GgmlType t, int64_t n, Fill fill, bool max_scales,
                                std::mt19937& rng) {
  std::vector<uint8_t> w(row_bytes(t, n));
  for (uint8_t& b : w)
    b = fill == Fill::Random ? static_cast<uint8_t>(rng()) : fill == Fill::AllOnes ? 0xFF : 0x00;
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  const size_t bb = ggml_type_info(t).block_bytes;
  for (size_t off = 0; off < w.size(); off += bb) {
    uint8_t* blk = w.data() + off;
    switch (t) {
      case GgmlType::MXFP4:
        blk[0] = static_cast<uint8_t>(120 + rng() % 16);
        break;  // 2^-7 .. 2^8
      case GgmlType::Q4_1:
      case GgmlType::Q5_1:
        put_half(blk, scale(rng));
        put_half(blk + 2, scale(rng));
        break;
      case GgmlType::Q4_K:
      case GgmlType::Q5_K:
        put_half(blk, scale(rng));
        put_half(blk + 2, scale(rng));
        if (max_scales) std::memset(blk + 4, 0xFF, kKScaleBytes);  // every scale and min = 63
        break;
      case GgmlType::Q6_K: {
        put_half(blk + offsetof(BlockQ6K, d), scale(rng));
        if (max_scales)
          for (int s = 0; s < kQK_K / 16; ++s)
            blk[offsetof(BlockQ6K, scales) + s] = s % 2 ? 0x80 : 0x7F;
        break;
      }
      default:
        put_half(blk, scale(rng));
        break;  // Q4_0, Q5_0, Q8_0, IQ4_NL: d first
    }
  }
  return w;
}

int8_t act_value(ActFill fill, std::mt19937& rng) {
  if (fill == ActFill::Max) return 127;
  if (fill == ActFill::Min) return -128;
  return static_cast<int8_t>(rng());
}

// An activation row of t's vec_dot_type (Q8_0, Q8_1 or Q8_K) with consistent
// block sums. -128 is included on purpose: the kernels must agree on it too.
std::vector<uint8_t> activation_row(GgmlType t, int64_t n, ActFill fill, std::mt19937& rng) {
  std::uniform_real_distribution<float> scale(0.001f, 1.0f);
  if (is_kquant(t)) {
    std::vector<BlockQ8K> a(static_cast<size_t>(n / kQK_K));
    for (BlockQ8K& b : a) {
      b.d = scale(rng);
      for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int k = 0; k < 16; ++k) sum += b.qs[16 * g + k] = act_value(fill, rng);
        b.bsums[g] = static_cast<int16_t>(sum);
      }
    }
    std::vector<uint8_t> out(a.size() * sizeof(BlockQ8K));
    std::memcpy(out.data(), a.data(), out.size());
    return out;
  }
  const bool q8_1 = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
  std::vector<uint8_t> out(row_bytes(q8_1 ? GgmlType::Q8_1 : GgmlType::Q8_0, n));
  const size_t bb = q8_1 ? sizeof(BlockQ8_1) : sizeof(BlockQ8_0);
  for (size_t off = 0; off < out.size(); off += bb) {
    const float d = scale(rng);
    put_half(out.data() + off, d);
    auto* qs = reinterpret_cast<int8_t*>(out.data() + off + (q8_1 ? 4 : 2));
    int sum = 0;
    for (int k = 0; k < 32; ++k) sum += qs[k] = act_value(fill, rng);
    if (q8_1) put_half(out.data() + off + 2, d * static_cast<float>(sum));
  }
  return out;
}

std::vector<int64_t> row_lengths(GgmlType t) {
  // Legacy: one block, an odd count (the two-blocks-per-iteration tail), many.
  if (!is_kquant(t)) return {32, 96, 512};
  return {256, 768, 2048};
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

std::string describe(GgmlType t, int64_t n, Fill f, ActFill af, bool max_scales) {
  return std::string(ggml_type_name(t)) + " n=" + std::to_string(n) +
         " fill=" + std::to_string(int(f)) + " act=" + std::to_string(int(af)) +
         (max_scales ? " max-scales" : "");
}

// The fills every bit-identity test runs: random, then the extremes.
struct Variant {
  Fill fill;
  ActFill act;
  bool max_scales;
};
constexpr Variant kVariants[] = {
    {Fill::Random, ActFill::Random, false}, {Fill::Random, ActFill::Random, true},
    {Fill::AllOnes, ActFill::Max, true},    {Fill::AllOnes, ActFill::Min, true},
    {Fill::AllZeros, ActFill::Max, true},   {Fill::AllZeros, ActFill::Min, true},
    {Fill::AllOnes, ActFill::Min, false},   {Fill::Random, ActFill::Min, true},
};

TEST(KernelsVnni, CpuDetectionAgreesWithTheKernelsCpuFlags) {
  const CpuFeatures& f = cpu_features();
  if (f.avxvnni) {
    EXPECT_TRUE(f.avx2) << "AVX-VNNI is only reported together with usable AVX2";
  }
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool found_flags = false, listed = false;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    found_flags = true;
    listed = (line + " ").find(" avx_vnni ") != std::string::npos;
    break;
  }
  if (!found_flags) GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  // The kernel lists avx_vnni from the same CPUID bit (and hides it when the
  // OS does not enable YMM state, as our detection requires).
  if (listed) {
    EXPECT_EQ(f.avxvnni, f.avx2) << "/proc/cpuinfo lists avx_vnni";
  } else if (f.avxvnni) {
    // Linux kernels before 5.16 do not know the flag at all.
    GTEST_SKIP() << "CPUID reports AVX-VNNI but this kernel's /proc/cpuinfo does not list avx_vnni";
  }
}

TEST(KernelsVnni, RegisteredOnlyWhenTheCpuHasItAndChosenByDefault) {
  if (!has_vnni()) {
    for (GgmlType t : kVnniDotTypes)
      EXPECT_EQ(kernels_for(t, Isa::AvxVnni), nullptr) << ggml_type_name(t);
    EXPECT_NE(best_isa(), Isa::AvxVnni);
    GTEST_SKIP() << "this CPU lacks AVX-VNNI: checked only that nothing is registered";
  }
  EXPECT_EQ(best_isa(), cpu_features().amx_int8 ? Isa::Amx : has_avx512vnni() ? Isa::Avx512Vnni : Isa::AvxVnni);
  EXPECT_STREQ(isa_name(Isa::AvxVnni), "avxvnni");
  for (GgmlType t : kVnniDotTypes) {
    const TypeKernels* k = kernels_for(t, Isa::AvxVnni);
    ASSERT_NE(k, nullptr) << ggml_type_name(t);
    ASSERT_NE(k->vec_dot, nullptr) << ggml_type_name(t);
    EXPECT_EQ(k->vec_dot_type, kernels_for(t, Isa::Scalar)->vec_dot_type) << ggml_type_name(t);
    // Chosen unless AVX-512 VNNI has the type too.
    const TypeKernels& chosen = *kernels_for(t, default_isa_of(t));
    EXPECT_TRUE(default_isa_of(t) == Isa::AvxVnni || default_isa_of(t) == Isa::Avx512Vnni ||
                (default_isa_of(t) == Isa::Amx && t == GgmlType::Q4_K))
        << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot, chosen.vec_dot) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_cols, chosen.vec_dot_cols) << ggml_type_name(t);
  }
  for (GgmlType t : kVnniColsTypes) EXPECT_NE(kernels_for(t, Isa::AvxVnni)->vec_dot_cols, nullptr);
  // Formats without a VNNI version keep their AVX2 kernels.
  for (GgmlType t : {GgmlType::F32, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS}) {
    EXPECT_EQ(kernels_for(t).vec_dot, kernels_for(t, Isa::Avx2)->vec_dot) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_cols, kernels_for(t, Isa::Avx2)->vec_dot_cols)
        << ggml_type_name(t);
  }
}

// Every variant of every row length: the vec_dot of `isa` against AVX2's.
template <size_t K>
void expect_vec_dot_matches_avx2(Isa isa, const GgmlType (&types)[K], uint32_t seed) {
  std::mt19937 rng(seed);
  for (GgmlType t : types) {
    const VecDotFn avx2 = kernels_for(t, Isa::Avx2)->vec_dot;
    const VecDotFn dot = kernels_for(t, isa)->vec_dot;
    for (int64_t n : row_lengths(t)) {
      for (const Variant& v : kVariants) {
        for (int rep = 0; rep < (v.fill == Fill::Random ? 4 : 1); ++rep) {
          const std::vector<uint8_t> w = weight_row(t, n, v.fill, v.max_scales, rng);
          const std::vector<uint8_t> a = activation_row(t, n, v.act, rng);
          const float want = avx2(n, w.data(), a.data());
          const float got = dot(n, w.data(), a.data());
          EXPECT_TRUE(same_bits(got, want)) << describe(t, n, v.fill, v.act, v.max_scales) << ": "
                                            << isa_name(isa) << " " << got << " avx2 " << want;
        }
      }
    }
  }
}

// Every column count 1..kMaxDotCols of `isa`'s multi-column dot, each column
// against the AVX2 vec_dot.
template <size_t K>
void expect_dot_cols_match_avx2(Isa isa, const GgmlType (&types)[K], uint32_t seed) {
  std::mt19937 rng(seed);
  for (GgmlType t : types) {
    const VecDotFn avx2 = kernels_for(t, Isa::Avx2)->vec_dot;
    const VecDotColsFn cols = kernels_for(t, isa)->vec_dot_cols;
    for (int64_t n : row_lengths(t)) {
      for (const Variant& v : kVariants) {
        const std::vector<uint8_t> w = weight_row(t, n, v.fill, v.max_scales, rng);
        // Columns of different fills in one call: an extreme column next to random ones.
        std::vector<std::vector<uint8_t>> act;
        std::vector<const void*> ptrs;
        for (int j = 0; j < kMaxDotCols; ++j)
          act.push_back(activation_row(t, n, j % 2 ? v.act : ActFill::Random, rng));
        for (const auto& a : act) ptrs.push_back(a.data());
        for (int m = 1; m <= kMaxDotCols; ++m) {
          float out[kMaxDotCols + 1];
          out[m] = -4242.0f;
          cols(n, w.data(), ptrs.data(), m, out);
          EXPECT_EQ(out[m], -4242.0f) << "wrote past n_act";
          for (int j = 0; j < m; ++j) {
            const float want = avx2(n, w.data(), ptrs[j]);
            EXPECT_TRUE(same_bits(out[j], want))
                << describe(t, n, v.fill, v.act, v.max_scales) << " m=" << m << " col " << j << ": "
                << isa_name(isa) << " " << out[j] << " avx2 " << want;
          }
        }
      }
    }
  }
}

TEST(KernelsVnni, VecDotIsBitIdenticalToAvx2) {
  SKIP_WITHOUT_VNNI();
  expect_vec_dot_matches_avx2(Isa::AvxVnni, kVnniDotTypes, 2024);
}

TEST(KernelsVnni, DotColsIsBitIdenticalToAvx2VecDot) {
  SKIP_WITHOUT_VNNI();
  expect_dot_cols_match_avx2(Isa::AvxVnni, kVnniColsTypes, 77);
}

TEST(KernelsVnni, Avx512RegisteredOnlyWhenTheCpuHasItAndChosenByDefault) {
  if (!has_avx512vnni()) {
    for (GgmlType t : kAvx512Types) EXPECT_EQ(kernels_for(t, Isa::Avx512Vnni), nullptr) << ggml_type_name(t);
    EXPECT_NE(best_isa(), Isa::Avx512Vnni);
    GTEST_SKIP() << "this CPU lacks AVX-512 VNNI: checked only that nothing is registered";
  }
  EXPECT_TRUE(cpu_features().avx2) << "AVX-512 VNNI is only reported together with usable AVX2";
  EXPECT_EQ(best_isa(), cpu_features().amx_int8 ? Isa::Amx : Isa::Avx512Vnni);
  EXPECT_STREQ(isa_name(Isa::Avx512Vnni), "avx512vnni");
  for (GgmlType t : kAvx512Types) {
    const TypeKernels* k = kernels_for(t, Isa::Avx512Vnni);
    ASSERT_NE(k, nullptr) << ggml_type_name(t);
    ASSERT_NE(k->vec_dot, nullptr) << ggml_type_name(t);
    ASSERT_NE(k->vec_dot_cols, nullptr) << ggml_type_name(t);
    EXPECT_EQ(k->vec_dot_type, is_kquant(t) ? GgmlType::Q8_K : GgmlType::Q8_0) << ggml_type_name(t);
    if (default_isa_of(t) == Isa::Amx) continue;  // AMX serves it (kernels_runsum_test.cpp)
    EXPECT_EQ(kernels_for(t).vec_dot, k->vec_dot) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_cols, k->vec_dot_cols) << ggml_type_name(t);
  }
  // The offset legacy formats keep their AVX-VNNI / AVX2 entries.
  EXPECT_EQ(kernels_for(GgmlType::Q4_1, Isa::Avx512Vnni), nullptr);
  EXPECT_EQ(kernels_for(GgmlType::Q5_1, Isa::Avx512Vnni), nullptr);
}

TEST(KernelsVnni, Avx512VecDotIsBitIdenticalToAvx2) {
  SKIP_WITHOUT_AVX512VNNI();
  expect_vec_dot_matches_avx2(Isa::Avx512Vnni, kAvx512Avx2BitsTypes, 4048);
}

TEST(KernelsVnni, Avx512DotColsIsBitIdenticalToAvx2VecDot) {
  SKIP_WITHOUT_AVX512VNNI();
  expect_dot_cols_match_avx2(Isa::Avx512Vnni, kAvx512Avx2BitsTypes, 154);
}

// Quantized real-looking rows through the public quantizers (the path the
// engine takes): default kernels (VNNI here) equal the AVX2 ones bit for bit.
// Q4_K is left out where AMX serves it, and the legacy formats where AVX-512
// VNNI does: those sets round differently on purpose (quant.h;
// kernels_runsum_test.cpp and kernels_legacy_test.cpp check them).
TEST(KernelsVnni, QuantizedGaussianRowsGiveTheAvx2Bits) {
  SKIP_WITHOUT_VNNI();
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (GgmlType t : kVnniColsTypes) {
    if (default_isa_of(t) == Isa::Amx || (!is_kquant(t) && default_isa_of(t) == Isa::Avx512Vnni)) continue;
    const int64_t n = 1024;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (float& v : x) v = gauss(rng);
    for (float& v : y) v = gauss(rng);
    std::vector<uint8_t> w(row_bytes(t, n));
    quantize_row(t, x.data(), w.data(), n);
    const GgmlType at = kernels_for(t).vec_dot_type;
    std::vector<uint8_t> a(row_bytes(at, n));
    quantize_row(at, y.data(), a.data(), n);
    const float want = kernels_for(t, Isa::Avx2)->vec_dot(n, w.data(), a.data());
    EXPECT_TRUE(same_bits(kernels_for(t).vec_dot(n, w.data(), a.data()), want))
        << ggml_type_name(t);
    const void* ptr = a.data();
    float out = 0.0f;
    dot_cols(kernels_for(t), n, w.data(), &ptr, 1, &out);
    EXPECT_TRUE(same_bits(out, want)) << ggml_type_name(t);
  }
}

}  // namespace
}  // namespace sluice::kernels

// This file's macros end with it (tests/CMakeLists.txt: unity build).
#undef SKIP_WITHOUT_VNNI
#undef SKIP_WITHOUT_AVX512VNNI
