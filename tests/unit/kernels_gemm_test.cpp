// Multi-column dot products (TypeKernels::vec_dot_cols, kernels::dot_cols)
// and the matmul that uses them.
//
// The contract is bit-identity: each column's result equals the same ISA's
// single-row vec_dot exactly, so the checks here are memcmp-exact. A sanity
// check against the scalar reference (tolerance 1e-5 * sum|w a|, as in
// kernels_legacy_test.cpp) guards against both paths being wrong together.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant.h"
#include "model/matmul.h"
#include "util/cpu_features.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace SLUICE_TEST_FILE {

// The formats with multi-column kernels, and row lengths that exercise every
// loop: odd legacy block counts (the 2-blocks-per-iteration tail), plain rows
// with 32-, 8- and scalar-element tails, several K-quant super-blocks.
struct Case {
  GgmlType type;
  int64_t n;
};
constexpr Case kCases[] = {
    {GgmlType::F32, 77},  {GgmlType::F32, 512}, {GgmlType::F16, 77},  {GgmlType::F16, 520},
    {GgmlType::Q4_0, 96}, {GgmlType::Q4_0, 512}, {GgmlType::Q8_0, 96}, {GgmlType::Q8_0, 512},
    {GgmlType::Q4_K, 256}, {GgmlType::Q4_K, 768}, {GgmlType::Q5_K, 512}, {GgmlType::Q6_K, 256},
    {GgmlType::Q6_K, 768},
};

std::string label(GgmlType t, int64_t n) { return std::string(ggml_type_name(t)) + " n=" + std::to_string(n); }

size_t row_bytes(GgmlType t, int64_t n) { return static_cast<size_t>(*ggml_row_bytes(t, static_cast<uint64_t>(n))); }

std::vector<uint8_t> quantized(GgmlType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(row_bytes(t, n));
  if (t == GgmlType::F32) {
    std::memcpy(out.data(), x.data(), out.size());
  } else {
    quantize_row(t, x.data(), out.data(), n);
  }
  return out;
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// One weight row and kCols activation rows in the weight's vec_dot_type.
struct Operands {
  static constexpr int kCols = 9;  // > 2 * kMaxDotCols: dot_cols must group
  std::vector<uint8_t> w;
  std::vector<std::vector<uint8_t>> act;
  std::vector<const void*> act_ptrs;
  std::vector<float> w_f32;
  std::vector<std::vector<float>> act_f32;
};

Operands make_operands(GgmlType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Operands o;
  o.w_f32 = random_floats(n, rng);
  o.w = quantized(t, o.w_f32);
  const GgmlType at = kernels_for(t).vec_dot_type;
  for (int j = 0; j < Operands::kCols; ++j) {
    o.act_f32.push_back(random_floats(n, rng));
    o.act.push_back(quantized(at, o.act_f32.back()));
  }
  for (const auto& a : o.act) o.act_ptrs.push_back(a.data());
  return o;
}

TEST(KernelsDotCols, EveryIsaMatchesItsOwnVecDotBitForBit) {
  for (const Case& c : kCases) {
    const Operands o = make_operands(c.type, c.n, 7 + static_cast<uint32_t>(c.n));
    for (int isa = 0; isa < kIsaCount; ++isa) {
      const TypeKernels* k = kernels_for(c.type, static_cast<Isa>(isa));
      if (!k || !k->vec_dot_cols || !k->vec_dot) continue;
      for (int m = 1; m <= kMaxDotCols; ++m) {
        float out[kMaxDotCols];
        k->vec_dot_cols(c.n, o.w.data(), o.act_ptrs.data(), m, out);
        for (int j = 0; j < m; ++j) {
          const float ref = k->vec_dot(c.n, o.w.data(), o.act_ptrs[j]);
          EXPECT_EQ(0, std::memcmp(&ref, &out[j], sizeof(float)))
              << label(c.type, c.n) << " " << isa_name(static_cast<Isa>(isa)) << " m=" << m << " col " << j
              << ": " << out[j] << " vs vec_dot " << ref;
        }
      }
    }
  }
}

TEST(KernelsDotCols, DotColsGroupsAnyCountAndMatchesVecDot) {
  for (const Case& c : kCases) {
    const Operands o = make_operands(c.type, c.n, 100 + static_cast<uint32_t>(c.n));
    const TypeKernels& k = kernels_for(c.type);
    const TypeKernels& ref_k = *kernels_for(c.type, Isa::Scalar);
    for (int m = 0; m <= Operands::kCols; ++m) {
      std::vector<float> out(static_cast<size_t>(m) + 1, -12345.0f);
      dot_cols(k, c.n, o.w.data(), o.act_ptrs.data(), m, out.data());
      EXPECT_EQ(out[m], -12345.0f) << "wrote past n_act";
      for (int j = 0; j < m; ++j) {
        const float same_isa = k.vec_dot(c.n, o.w.data(), o.act_ptrs[j]);
        EXPECT_EQ(0, std::memcmp(&same_isa, &out[j], sizeof(float))) << label(c.type, c.n) << " m=" << m;
        // Against the scalar reference: reordered float sums only.
        const float scalar = ref_k.vec_dot(c.n, o.w.data(), o.act_ptrs[j]);
        double mag = 0;
        for (int64_t i = 0; i < c.n; ++i) mag += std::fabs(o.w_f32[i] * o.act_f32[j][i]);
        EXPECT_NEAR(out[j], scalar, 1e-5 * mag + 1e-6) << label(c.type, c.n) << " col " << j;
      }
    }
  }
}

TEST(KernelsDotCols, Avx2HasMultiColumnKernelsForTheHotFormats) {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx2 && f.fma && f.f16c)) GTEST_SKIP() << "CPU has no AVX2+FMA+F16C";
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    // The highest ISA with a vec_dot for t supplies the multi-position
    // functions too (the pairs whose bit-identity the tests check).
    const TypeKernels* want = kernels_for(t, Isa::Avx2);
    for (int i = static_cast<int>(Isa::Avx2) + 1; i < kIsaCount; ++i) {
      const TypeKernels* k = kernels_for(t, static_cast<Isa>(i));
      if (k && k->vec_dot) want = k;
    }
    // AMX Q4_K has the tile GEMM instead of a multi-column dot.
    if (t == GgmlType::Q4_K && cpu_features().amx_int8) {
      EXPECT_NE(kernels_for(t).gemm_tile, nullptr);
    } else {
      EXPECT_NE(kernels_for(t).vec_dot_cols, nullptr) << ggml_type_name(t);
    }
    EXPECT_EQ(kernels_for(t).vec_dot, want->vec_dot) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).vec_dot_cols, want->vec_dot_cols) << ggml_type_name(t);
    EXPECT_EQ(kernels_for(t).gemm_tile, want->gemm_tile) << ggml_type_name(t);
  }
  // Scalar has none: dot_cols loops over the scalar vec_dot there.
  EXPECT_EQ(kernels_for(GgmlType::Q4_K, Isa::Scalar)->vec_dot_cols, nullptr);
}

// The tiled matmul gives every element exactly the single-row vec_dot, for any
// number of positions (tile edges, partial groups) and any thread count.
TEST(KernelsDotCols, MatmulEqualsPerElementVecDotForAnyPositionsAndThreads) {
  const int64_t n_in = 256, n_out = 37;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F32}) {
    std::mt19937 rng(3);
    const std::vector<float> wf = random_floats(n_in * n_out, rng);
    std::vector<uint8_t> wq(row_bytes(t, n_in) * n_out);
    for (int64_t r = 0; r < n_out; ++r) {
      const std::vector<float> row(wf.begin() + r * n_in, wf.begin() + (r + 1) * n_in);
      const std::vector<uint8_t> q = quantized(t, row);
      std::memcpy(&wq[r * row_bytes(t, n_in)], q.data(), q.size());
    }
    const model::WeightMatrix w = model::make_weight(wq.data(), t, n_in, n_out, "test.w");
    for (int64_t n_pos : {1, 3, 4, 5, 70, 130}) {
      const std::vector<float> x = random_floats(n_pos * n_in, rng);
      model::QuantizedRows rows;
      model::ThreadPool one(1);
      rows.quantize(w.kern->vec_dot_type, x.data(), n_pos, n_in, n_in, &one);
      std::vector<float> expect(static_cast<size_t>(n_pos * n_out));
      for (int64_t p = 0; p < n_pos; ++p)
        for (int64_t r = 0; r < n_out; ++r) expect[p * n_out + r] = w.kern->vec_dot(n_in, w.row(r), rows.row(p));
      for (int threads : {1, 2, 3}) {
        model::ThreadPool pool(threads);
        model::QuantizedRows scratch;
        std::vector<float> out(expect.size());
        model::matmul_f32(w, x.data(), n_pos, out.data(), pool, scratch);
        EXPECT_EQ(0, std::memcmp(out.data(), expect.data(), out.size() * sizeof(float)))
            << ggml_type_name(t) << " positions " << n_pos << " threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::kernels
