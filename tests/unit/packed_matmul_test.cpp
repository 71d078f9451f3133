// matmul / matmul_rows over packed WeightMatrix views (model/matmul.h): every
// output must be bit-identical to the plain matrix's, for decode and prefill,
// any thread count, row ranges that cut packed groups, and n_out that is not
// a multiple of kPackRows (the plain tail). Nothing outside the requested rows
// may be written.
//
// The engine's grouping is checked with a test-only layout (a byte transpose
// of each group, computed back through the type's own vec_dot) so these tests
// run on every CPU; the real kernels' layouts are checked the same way where
// kernels_for(type) has them.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant.h"
#include "model/matmul.h"
#include "model/packed_layout.h"
#include "model/thread_pool.h"
#include "util/ggml_type.h"

namespace sluice::model {
namespace SLUICE_TEST_FILE {

constexpr int64_t G = kernels::kPackRows;

// ---- a test-only packed layout over a real type's vec_dot -----------------------

const kernels::TypeKernels* g_real = nullptr;  // the entry the test layout wraps
size_t g_row_bytes = 0;

// Byte transpose: byte b of row r goes to b * G + r. Any permutation would do;
// this one scatters every row across the whole group.
void test_pack_rows(int64_t, const void* src, void* dst) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < G; ++r)
    for (size_t b = 0; b < g_row_bytes; ++b)
      d[b * G + static_cast<size_t>(r)] = s[static_cast<size_t>(r) * g_row_bytes + b];
}

void test_packed_dot(int64_t n, const void* packed, const void* const* act, int n_act, float* out,
                     int64_t out_stride) {
  const auto* p = static_cast<const uint8_t*>(packed);
  std::vector<uint8_t> row(g_row_bytes);
  for (int64_t r = 0; r < G; ++r) {
    for (size_t b = 0; b < g_row_bytes; ++b) row[b] = p[b * G + static_cast<size_t>(r)];
    for (int j = 0; j < n_act; ++j)
      out[j * out_stride + r] = g_real->vec_dot(n, row.data(), act[j]);
  }
}

struct Case {
  GgmlType type;
  int64_t n_in;
  int64_t n_out;
};

std::vector<uint8_t> random_matrix(GgmlType t, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_in * n_out));
  for (float& v : x) v = d(rng);
  const size_t rb = static_cast<size_t>(*ggml_row_bytes(t, static_cast<uint64_t>(n_in)));
  std::vector<uint8_t> q(rb * static_cast<size_t>(n_out));
  for (int64_t r = 0; r < n_out; ++r)
    kernels::quantize_row(t, &x[static_cast<size_t>(r * n_in)], &q[rb * r], n_in);
  return q;
}

// Activations for `n_pos` positions, converted to the weight's vec_dot_type.
struct Acts {
  QuantizedRows rows;
  std::vector<const void*> ptr;
};
void make_acts(const WeightMatrix& w, int64_t n_pos, Acts& a) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_pos * w.n_in));
  for (float& v : x) v = d(rng);
  a.rows.quantize(w.kern->vec_dot_type, x.data(), n_pos, w.n_in, w.n_in, nullptr);
  a.ptr.resize(static_cast<size_t>(n_pos));
  for (int64_t i = 0; i < n_pos; ++i) a.ptr[static_cast<size_t>(i)] = a.rows.row(i);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The plain and packed views of one matrix, packed through `kern`.
struct Pair {
  std::vector<uint8_t> plain_bytes, packed_bytes;
  WeightMatrix plain, packed;
};
Pair make_pair(const Case& c, const kernels::TypeKernels& kern) {
  Pair p;
  p.plain_bytes = random_matrix(c.type, c.n_in, c.n_out, 11);
  p.packed_bytes = p.plain_bytes;
  p.plain = make_weight(p.plain_bytes.data(), c.type, c.n_in, c.n_out, "w");
  WeightMatrix shape = p.plain;
  shape.kern = &kern;
  const uint64_t packed = pack_in_place(p.packed_bytes.data(), shape, nullptr);
  EXPECT_EQ(packed, static_cast<uint64_t>(c.n_out / G) * G * p.plain.row_bytes);
  p.packed = as_packed(shape);
  p.packed.data = p.packed_bytes.data();
  EXPECT_EQ(p.packed.packed, c.n_out >= G);  // no whole group: nothing to pack, a plain view
  EXPECT_EQ(p.packed.packed_rows(), c.n_out - c.n_out % G);
  // The tail rows are untouched; the groups were re-laid (for a real layout
  // some byte moves; the test layout moves every row but row 0's first byte).
  const size_t tail = static_cast<size_t>(p.packed.packed_rows()) * p.plain.row_bytes;
  EXPECT_EQ(0, std::memcmp(p.plain_bytes.data() + tail, p.packed_bytes.data() + tail,
                           p.plain_bytes.size() - tail));
  if (tail > 0) {
    EXPECT_NE(0, std::memcmp(p.plain_bytes.data(), p.packed_bytes.data(), tail));
  }
  return p;
}

constexpr float kSentinel = -12345.5f;

// Every way of computing w against n_pos positions, as one vector per way.
void check_all_ways(const Pair& p, int64_t n_pos) {
  Acts a;
  make_acts(p.plain, n_pos, a);
  const int64_t n_out = p.plain.n_out;
  const int64_t stride = n_out + 5;  // columns past n_out must stay untouched
  std::vector<float> want(static_cast<size_t>(n_pos * stride), kSentinel);
  ThreadPool one(1);
  matmul(p.plain, a.ptr, want.data(), stride, one);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> got(want.size(), kSentinel);
    matmul(p.packed, a.ptr, got.data(), stride, pool);
    EXPECT_TRUE(same_bits(got, want))
        << "matmul, " << threads << " threads, " << n_pos << " positions, n_out " << n_out;
  }
  // Row ranges that start, end or lie inside a group, and the tail alone.
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, n_out},
                                                           {5, 37},
                                                           {16, 32},
                                                           {3, 4},
                                                           {17, 18},
                                                           {n_out - n_out % G, n_out},
                                                           {n_out - 9, n_out - 2},
                                                           {1, n_out - 1}};
  for (auto [r0, r1] : ranges) {
    if (r0 < 0 || r1 > n_out || r0 >= r1) continue;
    std::vector<float> got(want.size(), kSentinel);
    matmul_rows(p.packed, a.ptr, got.data(), stride, r0, r1);
    for (int64_t i = 0; i < n_pos; ++i)
      for (int64_t r = 0; r < stride; ++r) {
        const size_t k = static_cast<size_t>(i * stride + r);
        const float expect = r >= r0 && r < r1 ? want[k] : kSentinel;
        ASSERT_EQ(0, std::memcmp(&got[k], &expect, sizeof(float)))
            << "matmul_rows [" << r0 << ", " << r1 << ") position " << i << " row " << r << ", "
            << n_pos << " positions, n_out " << n_out;
      }
  }
}

const std::vector<Case> kCases = {
    {GgmlType::Q4_0, 256, 16 * 5 + 7},  // tail of 7
    {GgmlType::Q8_0, 96, 48},           // no tail
    {GgmlType::Q4_K, 256, 16 * 3 + 1},  // tail of 1
    {GgmlType::Q8_0, 64, 9},            // no group at all: all tail
};
const int64_t kPositions[] = {1, 3, 8, 13, 70};

TEST(PackedMatmul, TestLayoutGivesThePlainBitsForAnyRowsThreadsAndPositions) {
  for (const Case& c : kCases) {
    kernels::TypeKernels k = kernels::kernels_for(c.type);
    g_real = &kernels::kernels_for(c.type);
    g_row_bytes = static_cast<size_t>(*ggml_row_bytes(c.type, static_cast<uint64_t>(c.n_in)));
    k.pack_rows = test_pack_rows;
    k.packed_dot = test_packed_dot;
    k.prepare_packed = nullptr;  // the test layout has no prepared form
    k.packed_dot_prepared = nullptr;
    k.gemm_tile = nullptr;  // packed groups never use tiles; keep the tail's path the plain one
    k.prepare_tile = nullptr;
    const Pair p = make_pair(c, k);
    for (int64_t n_pos : kPositions) check_all_ways(p, n_pos);
  }
}

TEST(PackedMatmul, RealKernelsGiveThePlainBits) {
  int tested = 0;
  for (const Case& c : kCases) {
    const kernels::TypeKernels& k = kernels::kernels_for(c.type);
    if (!packable(k)) continue;
    ++tested;
    const Pair p = make_pair(c, k);
    for (int64_t n_pos : kPositions) check_all_ways(p, n_pos);
  }
  if (tested == 0)
    GTEST_SKIP()
        << "no packed kernels for Q4_0, Q8_0 or Q4_K on this CPU (TypeKernels::pack_rows unset)";
}

TEST(PackedMatmul, NotPackableLeavesBytesAndViewPlain) {
  kernels::TypeKernels k = kernels::kernels_for(GgmlType::Q8_0);
  k.pack_rows = nullptr;
  k.packed_dot = nullptr;
  k.prepare_packed = nullptr;
  k.packed_dot_prepared = nullptr;
  std::vector<uint8_t> bytes = random_matrix(GgmlType::Q8_0, 64, 32, 3);
  const std::vector<uint8_t> before = bytes;
  WeightMatrix w = make_weight(bytes.data(), GgmlType::Q8_0, 64, 32, "w");
  w.kern = &k;
  EXPECT_EQ(pack_in_place(bytes.data(), w, nullptr), 0u);
  EXPECT_EQ(bytes, before);
  EXPECT_FALSE(as_packed(w).packed);
  EXPECT_FALSE(expert_matrix(w, bytes.data(), true).packed);  // a view flag cannot make it packed
}

}  // namespace
}  // namespace sluice::model
