// The K-quant dot products (Q2_K..Q6_K, IQ4_XS: vec_dot, and each column of
// vec_dot_cols) give the same bits on every SIMD ISA: the x86 kernels (AVX2, AVX-VNNI,
// AVX-512 VNNI; x86/kquant_x86_dot_body.h) and both NEON builds (plain and
// sdot; arm/kquant_neon_body.h). Their integer sums are exact, so the float
// order decides the bits; it is written out here once (x86_order_k4,
// x86_order_q6, x86_order_q23, x86_order_iq4xs) and every SIMD dot is compared with it by memcmp. On x86 this checks that the written-out order is the kernels'
// order; on AArch64 that NEON follows it, so a model has the same logits on
// ARM and x86. AMX's Q4_K rounds its own way (quant.h) and is not compared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/blocks_kquant.h"
#include "kernels/quant.h"
#include "kernels/tables.h"
#include "kernels_test_support.h"
#include "util/cpu_features.h"
#include "util/fp16.h"
#include "util/ggml_type.h"

#if defined(__aarch64__)
#include "kernels/arm/kquant_neon.h"
#endif

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

size_t block_bytes(GgmlType t) { return ggml_type_info(t).block_bytes; }

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// x86's 8-lane reduction: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
float hsum8(const float a[8]) {
  const float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
  return (s0 + s2) + (s1 + s3);
}

// Lane m of a 32-element run starting at element e0: sum of the products at
// run positions 4m..4m+3.
int lane_sum(const int* q, const int8_t* y, int e0, int m) {
  int s = 0;
  for (int e = e0 + 4 * m; e < e0 + 4 * m + 4; ++e) s += q[e] * y[e];
  return s;
}

// Q4_K (five_bit = false) / Q5_K in the x86 order: per block eight lanes
// sumi[m] = sum over runs r (elements 32r..32r+31, scale sc[r]) of sc[r] *
// lane_sum, fused into acc with d = y.d * d_w; the mins as four lanes
// mn[2k] t[2k] + mn[2k+1] t[2k+1] (t[j] = bsums[2j] + bsums[2j+1]) fused into
// acc_min with dmin = y.d * dmin_w; result hsum8(acc) - ((m0+m2) + (m1+m3)).
float x86_order_k4(bool five_bit, int64_t n, const uint8_t* w, const BlockQ8K* a) {
  const size_t bytes = five_bit ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
  float acc[8] = {}, acc_min[4] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* b = w + static_cast<size_t>(i) * bytes;
    const BlockQ8K& y = a[i];
    uint8_t sc[8], mn[8];
    unpack_k4_scales(b + 4, sc, mn);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = five_bit ? qh + 32 : b + 16;
    int q[kQK_K];
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        q[64 * c + l] = qs[32 * c + l] & 15;
        q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        if (five_bit) {
          q[64 * c + l] |= ((qh[l] >> (2 * c)) & 1) << 4;
          q[64 * c + 32 + l] |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
        }
      }
    }
    const float d = y.d * half_at(b);
    const float dmin = y.d * half_at(b + 2);
    for (int k = 0; k < 4; ++k) {
      const int t0 = y.bsums[4 * k] + y.bsums[4 * k + 1], t1 = y.bsums[4 * k + 2] + y.bsums[4 * k + 3];
      acc_min[k] = std::fma(dmin, static_cast<float>(mn[2 * k] * t0 + mn[2 * k + 1] * t1), acc_min[k]);
    }
    for (int m = 0; m < 8; ++m) {
      int sumi = 0;
      for (int r = 0; r < 8; ++r) sumi += sc[r] * lane_sum(q, y.qs, 32 * r, m);
      acc[m] = std::fma(d, static_cast<float>(sumi), acc[m]);
    }
  }
  return hsum8(acc) - ((acc_min[0] + acc_min[2]) + (acc_min[1] + acc_min[3]));
}

// Q6_K in the x86 order: quants unsigned (0..63); run r (elements
// 32r..32r+31) takes scale 2r in lanes 0-3 and 2r+1 in lanes 4-7; the -32 comes
// out as the offset lanes 32 * (sc[2m] bsums[2m] + sc[2m+1] bsums[2m+1]);
// each block's lanes fused into acc with d = y.d * d_w; result hsum8(acc).
float x86_order_q6(int64_t n, const uint8_t* w, const BlockQ8K* a) {
  float acc[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto& b = *reinterpret_cast<const BlockQ6K*>(w + static_cast<size_t>(i) * sizeof(BlockQ6K));
    const BlockQ8K& y = a[i];
    int q[kQK_K];
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        q[128 * h + l] = (ql[l] & 15) | ((qh[l] & 3) << 4);
        q[128 * h + 32 + l] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
        q[128 * h + 64 + l] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
        q[128 * h + 96 + l] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      }
    }
    const float d = y.d * half_at(reinterpret_cast<const uint8_t*>(&b.d));
    for (int m = 0; m < 8; ++m) {
      int sumi = 0;
      for (int r = 0; r < 8; ++r) sumi += b.scales[2 * r + (m >= 4)] * lane_sum(q, y.qs, 32 * r, m);
      sumi -= 32 * (b.scales[2 * m] * y.bsums[2 * m] + b.scales[2 * m + 1] * y.bsums[2 * m + 1]);
      acc[m] = std::fma(d, static_cast<float>(sumi), acc[m]);
    }
  }
  return hsum8(acc);
}

// Q2_K / Q3_K in the x86 order: run r (elements 32r..32r+31) takes scale 2r
// in lanes 0-3 and 2r+1 in lanes 4-7. Q2_K: quants 0..3, scales the low
// nibbles; its min lanes mn[2m] bsums[2m] + mn[2m+1] bsums[2m+1] (high
// nibbles) fused into acc_min with dmin = y.d * dmin_w; result hsum8(acc) -
// hsum8(acc_min). Q3_K: quants 0..7 (low 2 bits | hmask bit << 2), signed
// scales; the -4 out as the offset lanes 4 (sc[2m] bsums[2m] + sc[2m+1]
// bsums[2m+1]); result hsum8(acc). Both fuse each block's lanes with d = y.d * d_w.
float x86_order_q23(bool three_bit, int64_t n, const uint8_t* w, const BlockQ8K* a) {
  float acc[8] = {}, acc_min[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ8K& y = a[i];
    const uint8_t* b = w + static_cast<size_t>(i) * (three_bit ? sizeof(BlockQ3K) : sizeof(BlockQ2K));
    const uint8_t* qs = three_bit ? reinterpret_cast<const BlockQ3K*>(b)->qs : reinterpret_cast<const BlockQ2K*>(b)->qs;
    int sc[16], q[kQK_K];
    float d = 0;
    if (three_bit) {
      const auto& blk = *reinterpret_cast<const BlockQ3K*>(b);
      int8_t s8[16];
      unpack_q3k_scales(blk.scales, s8);
      for (int j = 0; j < 16; ++j) sc[j] = s8[j];
      d = y.d * half_at(reinterpret_cast<const uint8_t*>(&blk.d));
    } else {
      const auto& blk = *reinterpret_cast<const BlockQ2K*>(b);
      for (int j = 0; j < 16; ++j) sc[j] = blk.scales[j] & 15;
      d = y.d * half_at(reinterpret_cast<const uint8_t*>(&blk.d));
      const float dmin = y.d * half_at(reinterpret_cast<const uint8_t*>(&blk.dmin));
      for (int m = 0; m < 8; ++m)
        acc_min[m] = std::fma(dmin, static_cast<float>((blk.scales[2 * m] >> 4) * y.bsums[2 * m] +
                                                       (blk.scales[2 * m + 1] >> 4) * y.bsums[2 * m + 1]),
                              acc_min[m]);
    }
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
          int v = (qs[32 * h + l] >> (2 * k)) & 3;
          if (three_bit) v |= ((reinterpret_cast<const BlockQ3K*>(b)->hmask[l] >> (4 * h + k)) & 1) << 2;
          q[128 * h + 32 * k + l] = v;
        }
    for (int m = 0; m < 8; ++m) {
      int sumi = 0;
      for (int r = 0; r < 8; ++r) sumi += sc[2 * r + (m >= 4)] * lane_sum(q, y.qs, 32 * r, m);
      if (three_bit) sumi -= 4 * (sc[2 * m] * y.bsums[2 * m] + sc[2 * m + 1] * y.bsums[2 * m + 1]);
      acc[m] = std::fma(d, static_cast<float>(sumi), acc[m]);
    }
  }
  return three_bit ? hsum8(acc) : hsum8(acc) - hsum8(acc_min);
}

// IQ4_XS in the x86 order: sub-block r's 32 levels (low nibbles of qs[16r..],
// then the high ones) times its signed scale, lane m taking elements 4m..4m+3
// of each; each block's lanes fused with d = y.d * d_w; result hsum8(acc).
float x86_order_iq4xs(int64_t n, const uint8_t* w, const BlockQ8K* a) {
  float acc[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto& b = *reinterpret_cast<const BlockIq4Xs*>(w + static_cast<size_t>(i) * sizeof(BlockIq4Xs));
    const BlockQ8K& y = a[i];
    int q[kQK_K];
    for (int r = 0; r < 8; ++r)
      for (int l = 0; l < 16; ++l) {
        q[32 * r + l] = kIq4nlValues[b.qs[16 * r + l] & 15];
        q[32 * r + 16 + l] = kIq4nlValues[b.qs[16 * r + l] >> 4];
      }
    const float d = y.d * half_at(reinterpret_cast<const uint8_t*>(&b.d));
    for (int m = 0; m < 8; ++m) {
      int sumi = 0;
      for (int r = 0; r < 8; ++r) sumi += iq4xs_scale(b, r) * lane_sum(q, y.qs, 32 * r, m);
      acc[m] = std::fma(d, static_cast<float>(sumi), acc[m]);
    }
  }
  return hsum8(acc);
}

float x86_order_dot(GgmlType t, int64_t n, const uint8_t* w, const BlockQ8K* a) {
  switch (t) {
    case GgmlType::Q2_K: return x86_order_q23(false, n, w, a);
    case GgmlType::Q3_K: return x86_order_q23(true, n, w, a);
    case GgmlType::IQ4_XS: return x86_order_iq4xs(n, w, a);
    case GgmlType::Q6_K: return x86_order_q6(n, w, a);
    default: return x86_order_k4(t == GgmlType::Q5_K, n, w, a);
  }
}

// Where a type's fp16 super-scales live in its block: d, then dmin (-1: none).
std::pair<int, int> scale_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108, -1};
    case GgmlType::Q6_K: return {208, -1};
    case GgmlType::IQ4_XS: return {0, -1};
    default: return {0, 2};
  }
}

// Every bit of the scales and quants random; the fp16 super-scales finite, of
// either sign. fill >= 0: every quant and scale byte set to it instead.
std::vector<uint8_t> weight_row(GgmlType t, int64_t n, std::mt19937& rng, int fill = -1) {
  std::vector<uint8_t> row(static_cast<size_t>(n / kQK_K) * block_bytes(t));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& v : row) v = static_cast<uint8_t>(fill >= 0 ? fill : byte(rng));
  std::uniform_real_distribution<float> scale(0.001f, 2.0f);
  std::bernoulli_distribution negative(0.3);
  auto half = [&] { return fp32_to_fp16(negative(rng) ? -scale(rng) : scale(rng)); };
  const auto [d_at, dmin_at] = scale_offsets(t);
  for (size_t off = 0; off < row.size(); off += block_bytes(t)) {
    const uint16_t d = half(), dmin = half();
    std::memcpy(&row[off + d_at], &d, 2);
    if (dmin_at >= 0) std::memcpy(&row[off + dmin_at], &dmin, 2);
  }
  return row;
}

// Q8_K activations over lowest..127 (the kernels must stay exact even at
// -128, which the quantizer never writes), or all `fill`; bsums consistent.
// IQ4_XS is checked from -127: x86 multiplies its signed levels as |w| times
// y with w's sign moved onto y (_mm256_sign_epi8), and -128 has no negation.
std::vector<BlockQ8K> activation_row(int64_t n, std::mt19937& rng, int fill = 0, int lowest = -128) {
  std::vector<BlockQ8K> row(static_cast<size_t>(n / kQK_K));
  std::uniform_int_distribution<int> q(lowest, 127);
  std::uniform_real_distribution<float> d(0.001f, 0.5f);
  for (auto& b : row) {
    b.d = d(rng);
    for (int j = 0; j < kQK_K; ++j) b.qs[j] = static_cast<int8_t>(fill != 0 ? fill : q(rng));
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b.qs[16 * g + l];
      b.bsums[g] = static_cast<int16_t>(s);
    }
  }
  return row;
}

// One weight row and kMaxDotCols activation rows (the columns of vec_dot_cols).
struct Case {
  GgmlType type;
  int64_t n;
  std::vector<uint8_t> w;
  std::vector<std::vector<BlockQ8K>> a;
};

// Random rows of several lengths plus the extremes: every weight byte 0xFF or
// 0x00 (largest and smallest quants and scales) against all +127 / all -128
// (and random columns beside them).
std::vector<Case> cases() {
  std::vector<Case> out;
  std::mt19937 rng(28);
  for (GgmlType t : kTypes) {
    const int lowest = t == GgmlType::IQ4_XS ? -127 : -128;
    for (int64_t n : {256, 512, 2816, 4096}) {
      Case c{t, n, weight_row(t, n, rng), {}};
      for (int j = 0; j < kMaxDotCols; ++j) c.a.push_back(activation_row(n, rng, 0, lowest));
      out.push_back(std::move(c));
    }
    for (int fill : {0xFF, 0x00}) {
      Case c{t, 512, weight_row(t, 512, rng, fill), {}};
      c.a.push_back(activation_row(512, rng, 127));
      c.a.push_back(activation_row(512, rng, lowest));
      while (c.a.size() < static_cast<size_t>(kMaxDotCols)) c.a.push_back(activation_row(512, rng, 0, lowest));
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::string label(const Case& c) { return std::string(ggml_type_name(c.type)) + " n=" + std::to_string(c.n); }

// Compares one entry's vec_dot (every column on its own) and, if it has one,
// its vec_dot_cols (1, 3, 4, 5 and 8 columns at once) with the written-out
// order on every case; returns how many dots it checked.
int expect_x86_order(const TypeKernels& k, GgmlType t, const std::string& who) {
  int checked = 0;
  for (const Case& c : cases()) {
    if (c.type != t) continue;
    std::vector<float> want;
    for (const auto& a : c.a) want.push_back(x86_order_dot(t, c.n, c.w.data(), a.data()));
    for (size_t j = 0; j < c.a.size(); ++j) {
      const float got = k.vec_dot(c.n, c.w.data(), c.a[j].data());
      EXPECT_EQ(0, std::memcmp(&want[j], &got, sizeof(float)))
          << who << " " << label(c) << " column " << j << ": " << got << " vs " << want[j];
      ++checked;
    }
    if (!k.vec_dot_cols) continue;
    std::vector<const void*> act;
    for (const auto& a : c.a) act.push_back(a.data());
    for (int m : {1, 3, 4, 5, kMaxDotCols}) {
      std::vector<float> got(static_cast<size_t>(m));
      k.vec_dot_cols(c.n, c.w.data(), act.data(), m, got.data());
      for (int j = 0; j < m; ++j) {
        EXPECT_EQ(0, std::memcmp(&want[j], &got[j], sizeof(float)))
            << who << " cols " << label(c) << " m=" << m << " column " << j << ": " << got[j] << " vs " << want[j];
        ++checked;
      }
    }
  }
  return checked;
}

// The written-out order is a dot product: against the scalar reference it
// differs only by float rounding (so it cannot drift into something else).
// The tolerance is relative to sum |w_i a_i| of the dequantized rows.
TEST(KquantX86Order, WrittenOutOrderIsTheDotProduct) {
  for (const Case& c : cases()) {
    std::vector<float> wf(static_cast<size_t>(c.n)), af(static_cast<size_t>(c.n));
    kernels_for(c.type, Isa::Scalar)->dequantize(c.w.data(), wf.data(), c.n);
    for (const auto& a : c.a) {
      kernels_for(GgmlType::Q8_K, Isa::Scalar)->dequantize(a.data(), af.data(), c.n);
      double abs_sum = 0;
      for (int64_t i = 0; i < c.n; ++i) abs_sum += std::fabs(static_cast<double>(wf[i]) * af[i]);
      const float want = kernels_for(c.type, Isa::Scalar)->vec_dot(c.n, c.w.data(), a.data());
      const float got = x86_order_dot(c.type, c.n, c.w.data(), a.data());
      EXPECT_NEAR(got, want, 1e-5 * abs_sum) << label(c);
    }
  }
}

TEST(KquantX86Order, EverySimdIsaFollowsIt) {
  int checked = 0;
  for (Isa isa : simd_isas()) {
    // AMX's and NEON i8mm's Q4_K have their own rounding (quant.h, kernels_runsum_test.cpp).
    if (isa == Isa::Amx || isa == Isa::NeonI8mm) continue;
    for (GgmlType t : kTypes) {
      const TypeKernels* k = kernels_for(t, isa);
      if (!k || !k->vec_dot) continue;
      checked += expect_x86_order(*k, t, isa_name(isa));
    }
  }
  if (checked == 0) GTEST_SKIP() << "this CPU runs no SIMD K-quant dot";
}

#if defined(__aarch64__)
// Both NEON builds, whatever the hwcaps chose (the sdot one only where the
// CPU has sdot: under qemu -cpu max both run, under cortex-a53 the plain one).
TEST(KquantNeonTiers, BothBuildsFollowTheX86Order) {
  const bool sdot = cpu_features().neon_dotprod;
  // scripts/test.sh --aarch64 reads this line to check which builds ran.
  std::printf("[neon] kquant builds checked: plain%s\n", sdot ? ", sdot" : "");
  for (NeonTier tier : {NeonTier::Plain, NeonTier::Dotprod}) {
    if (tier == NeonTier::Dotprod && !sdot) continue;
    KernelTable table{};
    fill_kquant_neon_tier(table, tier);
    for (GgmlType t : kTypes) {
      const TypeKernels& k = table[static_cast<uint32_t>(t)];
      ASSERT_NE(k.vec_dot, nullptr) << ggml_type_name(t);
      ASSERT_NE(k.vec_dot_cols, nullptr) << ggml_type_name(t);
      EXPECT_EQ(k.vec_dot_type, GgmlType::Q8_K);
      EXPECT_GT(expect_x86_order(k, t, tier == NeonTier::Plain ? "neon-plain" : "neon-sdot"), 0);
    }
  }
}

// The registry serves the NEON dots, of the build the hwcaps call for.
TEST(KquantNeonTiers, RegistryUsesTheHwcapBuild) {
  KernelTable want{};
  fill_kquant_neon_tier(want, cpu_features().neon_dotprod ? NeonTier::Dotprod : NeonTier::Plain);
  for (GgmlType t : kTypes) {
    const TypeKernels* neon = kernels_for(t, Isa::Neon);
    ASSERT_NE(neon, nullptr) << ggml_type_name(t);
    EXPECT_EQ(neon->vec_dot, want[static_cast<uint32_t>(t)].vec_dot) << ggml_type_name(t);
    EXPECT_EQ(neon->vec_dot_cols, want[static_cast<uint32_t>(t)].vec_dot_cols) << ggml_type_name(t);
    // With i8mm, Q4_K is served by that tier (kernels_runsum_test.cpp).
    if (t == GgmlType::Q4_K && kernels_for(t, Isa::NeonI8mm)) continue;
    EXPECT_EQ(kernels_for(t).vec_dot, neon->vec_dot) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_cols, neon->vec_dot_cols) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_type, GgmlType::Q8_K) << ggml_type_name(t);
  }
}
#endif

}  // namespace
}  // namespace sluice::kernels
