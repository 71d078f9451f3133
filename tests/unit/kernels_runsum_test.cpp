// The run-sum Q4_K tiers, AMX (Isa::Amx) and the int8 matrix multiply of
// AArch64 (Isa::NeonI8mm): in each the tile GEMM and the one-position vec_dot
// share one rounding (quant.h), which a scalar implementation here defines
// independently; both must give its bits exactly, and stay within the usual
// tolerance of the scalar Q4_K reference. Each skips where the CPU (or the OS,
// for AMX's tiles) does not offer it; under qemu -cpu max the i8mm one runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/blocks_kquant.h"
#include "kernels/quant.h"
#include "util/cpu_features.h"
#include "util/fp16.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

// Whether this CPU offers `isa`, by its features rather than the registry.
bool offered(Isa isa) {
  const CpuFeatures& f = cpu_features();
  return isa == Isa::Amx ? f.amx_int8 : f.neon && f.neon_dotprod && f.neon_i8mm;
}

class KernelsRunsum : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!kernels_for(GgmlType::Q4_K, GetParam()))
      GTEST_SKIP() << isa_name(GetParam()) << " is not offered here (CPU features, or for AMX XCR0 or the kernel's "
                   << "arch_prctl grant)";
    // scripts/test.sh --aarch64 reads this line to check that the i8mm tier ran under -cpu max.
    if (GetParam() == Isa::NeonI8mm) std::printf("[neon] q4_k i8mm tile checked\n");
  }
  const TypeKernels& k() const { return *kernels_for(GgmlType::Q4_K, GetParam()); }
};

// Sub-block j's 6-bit scale and min from the 12 packed bytes (ggml's layout).
void scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The AMX rounding, element by element: per super-block the exact integers
// T = sum_r sc_r * D_r and M = sum_r m_r * S_r, then one fma each.
float runsum_reference(int64_t n, const BlockQ4K* w, const BlockQ8K* y) {
  float acc = 0.0f, accm = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int64_t T = 0, M = 0;
    for (int r = 0; r < 8; ++r) {
      int sc = 0, m = 0;
      scale_min(w[i].scales, r, sc, m);
      int64_t D = 0, S = 0;
      for (int e = 0; e < 32; ++e) {
        const uint8_t b = w[i].qs[32 * (r / 2) + e];
        const int q = r % 2 == 0 ? (b & 0xF) : (b >> 4);
        D += q * y[i].qs[32 * r + e];
        S += y[i].qs[32 * r + e];
      }
      T += sc * D;
      M += m * S;
    }
    acc = std::fma(y[i].d * fp16_to_fp32(w[i].d), static_cast<float>(T), acc);
    accm = std::fma(y[i].d * fp16_to_fp32(w[i].dmin), static_cast<float>(M), accm);
  }
  return acc - accm;
}

struct Rows {
  std::vector<float> w_f32, a_f32;     // n_rows x n, n_act x n
  std::vector<uint8_t> w, a;           // quantized, back to back
  size_t w_row = 0, a_row = 0;
  std::vector<const void*> act;
  const BlockQ4K* wrow(int r) const { return reinterpret_cast<const BlockQ4K*>(w.data() + r * w_row); }
};

Rows make_rows(int64_t n, int n_rows, int n_act, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  Rows o;
  o.w_row = *ggml_row_bytes(GgmlType::Q4_K, static_cast<uint64_t>(n));
  o.a_row = *ggml_row_bytes(GgmlType::Q8_K, static_cast<uint64_t>(n));
  o.w_f32.resize(static_cast<size_t>(n * n_rows));
  o.a_f32.resize(static_cast<size_t>(n * n_act));
  for (float& v : o.w_f32) v = gauss(rng);
  for (float& v : o.a_f32) v = gauss(rng);
  o.w.resize(o.w_row * n_rows);
  o.a.resize(o.a_row * n_act);
  for (int r = 0; r < n_rows; ++r) quantize_row(GgmlType::Q4_K, &o.w_f32[r * n], &o.w[r * o.w_row], n);
  for (int j = 0; j < n_act; ++j) quantize_row(GgmlType::Q8_K, &o.a_f32[j * n], &o.a[j * o.a_row], n);
  for (int j = 0; j < n_act; ++j) o.act.push_back(&o.a[j * o.a_row]);
  return o;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Not a fixture test: it checks the registry also where the tier is absent.
TEST(KernelsRunsumRegistry, RegisteredOnlyWhereOfferedAndChosenForQ4K) {
  for (Isa isa : {Isa::Amx, Isa::NeonI8mm}) {
    if (!offered(isa)) {
      EXPECT_EQ(kernels_for(GgmlType::Q4_K, isa), nullptr) << isa_name(isa);
      continue;
    }
    const TypeKernels* k = kernels_for(GgmlType::Q4_K, isa);
    ASSERT_NE(k, nullptr) << isa_name(isa);
    EXPECT_NE(k->prepare_tile, nullptr);
    EXPECT_NE(k->gemm_tile, nullptr);
    EXPECT_EQ(k->vec_dot_type, GgmlType::Q8_K);
    EXPECT_EQ(kernels_for(GgmlType::Q4_K).vec_dot, k->vec_dot);
    EXPECT_EQ(kernels_for(GgmlType::Q4_K).gemm_tile, k->gemm_tile);
    EXPECT_EQ(kernels_for(GgmlType::Q4_K).vec_dot_cols, nullptr);  // dot_cols loops over vec_dot
    EXPECT_EQ(best_isa(), isa);
    // Only Q4_K: the other formats keep their AVX-512 / AVX-VNNI / NEON entries.
    for (GgmlType t : {GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F32}) {
      EXPECT_EQ(kernels_for(t, isa), nullptr) << ggml_type_name(t);
    }
  }
  if (!offered(Isa::Amx) && !offered(Isa::NeonI8mm)) {
    EXPECT_EQ(kernels_for(GgmlType::Q4_K).gemm_tile, nullptr);
  }
  EXPECT_STREQ(isa_name(Isa::Amx), "amx");
  EXPECT_STREQ(isa_name(Isa::NeonI8mm), "neon-i8mm");
}

TEST_P(KernelsRunsum, VecDotGivesTheRoundingReferenceBits) {
  const TypeKernels& k = this->k();
  const TypeKernels& scalar = *kernels_for(GgmlType::Q4_K, Isa::Scalar);
  for (int64_t n : {256, 768, 2048, 4096}) {
    const Rows o = make_rows(n, 3, 4, 11 + static_cast<uint32_t>(n));
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < 4; ++j) {
        const auto* y = static_cast<const BlockQ8K*>(o.act[j]);
        const float got = k.vec_dot(n, o.wrow(r), y);
        const float want = runsum_reference(n, o.wrow(r), y);
        EXPECT_TRUE(same_bits(got, want)) << "n=" << n << " row " << r << " col " << j << ": " << got << " vs " << want;
        // Only the float rounding differs from the scalar Q4_K reference.
        double mag = 0;
        for (int64_t e = 0; e < n; ++e) mag += std::fabs(o.w_f32[r * n + e] * o.a_f32[j * n + e]);
        EXPECT_NEAR(got, scalar.vec_dot(n, o.wrow(r), y), 1e-5 * mag + 1e-6) << "n=" << n;
      }
  }
}

// Extreme blocks: every quant 15, every activation -128 or 127, all scales
// and mins 63: the integer sums at their largest must stay exact.
TEST_P(KernelsRunsum, ExtremeBlocksStayExact) {
  const TypeKernels& k = this->k();
  constexpr int64_t n = 512;
  std::vector<BlockQ4K> w(2);
  for (BlockQ4K& b : w) {
    b.d = 0x3c00;     // 1.0
    b.dmin = 0x3800;  // 0.5
    std::memset(b.scales, 0xFF, sizeof(b.scales));
    std::memset(b.qs, 0xFF, sizeof(b.qs));
  }
  for (int8_t v : {int8_t{-128}, int8_t{127}}) {
    std::vector<BlockQ8K> y(2);
    for (BlockQ8K& b : y) {
      b.d = 1.0f / 127;
      std::memset(b.qs, static_cast<uint8_t>(v), sizeof(b.qs));
      for (int s = 0; s < 16; ++s) b.bsums[s] = static_cast<int16_t>(16 * v);
    }
    EXPECT_TRUE(same_bits(k.vec_dot(n, w.data(), y.data()), runsum_reference(n, w.data(), y.data())))
        << "activations " << int{v};
    std::vector<TileLine> prepared(tile_prepared_lines(n));
    const void* act[1] = {y.data()};
    k.prepare_tile(n, act, 1, prepared.data());
    float out = 0.0f;
    k.gemm_tile({.n = n,
                 .w = reinterpret_cast<const uint8_t*>(w.data()),
                 .row_bytes = sizeof(BlockQ4K) * 2,
                 .n_rows = 1,
                 .prepared = prepared.data(),
                 .n_act = 1,
                 .out = &out,
                 .out_stride = 1});
    EXPECT_TRUE(same_bits(out, runsum_reference(n, w.data(), y.data()))) << "tile, activations " << int{v};
  }
}

// Every row count and position count of one tile call, written only where
// asked, each output equal to vec_dot bit for bit.
TEST_P(KernelsRunsum, TileGemmEqualsVecDotForEveryShape) {
  const TypeKernels& k = this->k();
  for (int64_t n : {256, 1024}) {
    const Rows o = make_rows(n, kTileRows, kTileCols, 29 + static_cast<uint32_t>(n));
    std::vector<TileLine> prepared(tile_prepared_lines(n));
    for (int n_act : {1, 2, 7, 15, 16}) {
      k.prepare_tile(n, o.act.data(), n_act, prepared.data());
      for (int n_rows : {1, 3, 8, 13, 16}) {
        const int64_t stride = kTileRows + 3;
        std::vector<float> out(static_cast<size_t>(stride * kTileCols), -7.0f);
        k.gemm_tile({.n = n,
                     .w = o.w.data(),
                     .row_bytes = o.w_row,
                     .n_rows = n_rows,
                     .prepared = prepared.data(),
                     .n_act = n_act,
                     .out = out.data(),
                     .out_stride = stride});
        for (int j = 0; j < kTileCols; ++j)
          for (int r = 0; r < stride; ++r) {
            const float got = out[j * stride + r];
            if (j < n_act && r < n_rows) {
              const float want = k.vec_dot(n, o.wrow(r), o.act[j]);
              EXPECT_TRUE(same_bits(got, want))
                  << "n=" << n << " rows " << n_rows << " positions " << n_act << " at " << r << "," << j;
            } else {
              EXPECT_EQ(got, -7.0f) << "wrote outside the tile: " << r << "," << j;
            }
          }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelsRunsum, ::testing::Values(Isa::Amx, Isa::NeonI8mm),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return i.param == Isa::Amx ? std::string("amx") : std::string("neon_i8mm");
                         });

}  // namespace
}  // namespace sluice::kernels
