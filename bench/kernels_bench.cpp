// Kernel throughput: dequantize, vec_dot, the 4- and 8-column dot_cols and the
// packed layout's pack_rows and 1-, 4- and 8-column packed_dot per format and ISA, in GB/s
// of weight bytes consumed (each weight byte once, whatever the column
// count), next to the machine's measured memory read bandwidth.
// "GMAC/s" counts multiply-adds (elements x columns).
//
// Two working-set sizes per kernel: "l2" (256 KiB of weights, cache-resident:
// the kernel's arithmetic limit) and "dram" (256 MiB: what decode sees when
// weights stream from memory). Run: build/bench/kernels_bench
//   --benchmark_filter=dot/.*dram   to see only the memory-bound rows;
//   --benchmark_filter='(dot|cols4|cols8)/Q4_K'  every ISA and width for one format;
//   --benchmark_filter='(dot|packed1)/Q4_0/avx512vnni'  decode's GEMV, per row vs packed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant.h"
#include "util/ggml_type.h"

namespace sluice::kernels {
namespace {

constexpr int64_t kRow = 4096;  // elements per row (multiple of every block size)
constexpr int kActRows = kMaxDotCols;  // activation rows (positions) for dot_cols

struct Fixture {
  std::vector<uint8_t> weights;  // rows of type t
  std::vector<uint8_t> act;      // kActRows rows of vec_dot_type, back to back
  uint64_t act_row_bytes = 0;
  int64_t rows = 0;
  uint64_t row_bytes = 0;
};

// Quantizes Gaussian rows with the scalar quantizer where one exists; otherwise
// fills random bytes with sane block scales (only throughput matters here).
Fixture make_fixture(GgmlType t, uint64_t target_bytes) {
  Fixture f;
  f.row_bytes = *ggml_row_bytes(t, kRow);
  f.rows = static_cast<int64_t>(std::max<uint64_t>(1, target_bytes / f.row_bytes));
  f.weights.resize(f.rows * f.row_bytes);
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(kRow);
  const TypeKernels& k = kernels_for(t);
  const TypeKernels* scalar = kernels_for(t, Isa::Scalar);
  QuantizeFn q = (scalar && scalar->quantize) ? scalar->quantize : k.quantize;
  // Quantize a few distinct rows and tile them: the reference K-quant search is
  // slow and the bytes' values don't change the kernels' speed.
  const int64_t distinct = std::min<int64_t>(f.rows, 16);
  for (int64_t r = 0; r < distinct; ++r) {
    for (auto& v : x) v = nd(rng);
    if (q) {
      q(x.data(), f.weights.data() + r * f.row_bytes, kRow);
    } else {
      for (uint64_t i = 0; i < f.row_bytes; ++i) f.weights[r * f.row_bytes + i] = rng() & 0x3f;
    }
  }
  for (int64_t r = distinct; r < f.rows; ++r)
    std::memcpy(f.weights.data() + r * f.row_bytes, f.weights.data() + (r % distinct) * f.row_bytes,
                f.row_bytes);
  const GgmlType at = k.vec_dot_type;
  f.act_row_bytes = *ggml_row_bytes(at, kRow);
  f.act.resize(f.act_row_bytes * kActRows);
  for (int j = 0; j < kActRows; ++j) {
    for (auto& v : x) v = nd(rng);
    kernels_for(at).quantize(x.data(), f.act.data() + j * f.act_row_bytes, kRow);
  }
  return f;
}

// The (t, isa) kernels when they have `fn`; else marks the benchmark skipped
// (registration only adds benchmarks whose function exists, so this guards
// against a registration slip) and returns nullptr.
template <class Fn>
const TypeKernels* kernels_or_skip(benchmark::State& state, GgmlType t, Isa isa, Fn TypeKernels::*fn) {
  const TypeKernels* k = kernels_for(t, isa);
  if (k && k->*fn) return k;
  state.SkipWithError("no such kernel for this ISA on this CPU");
  return nullptr;
}

// Weight bytes and multiply-adds per iteration -> bytes/s and GMAC/s.
void report_rates(benchmark::State& state, int64_t weight_bytes, int64_t multiply_adds) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * weight_bytes);
  state.counters["GMAC/s"] =
      benchmark::Counter(double(state.iterations()) * double(multiply_adds) / 1e9, benchmark::Counter::kIsRate);
}

void BM_dot(benchmark::State& state, GgmlType t, Isa isa, uint64_t bytes) {
  const TypeKernels* k = kernels_or_skip(state, t, isa, &TypeKernels::vec_dot);
  if (!k) return;
  Fixture f = make_fixture(t, bytes);
  float sink = 0;
  for (auto _ : state) {
    for (int64_t r = 0; r < f.rows; ++r) sink += k->vec_dot(kRow, f.weights.data() + r * f.row_bytes, f.act.data());
    benchmark::DoNotOptimize(sink);
  }
  report_rates(state, f.rows * f.row_bytes, f.rows * kRow);
}

// One weight row against `cols` activation rows per call (the prefill
// matmul's inner step; it uses kMaxDotCols).
void BM_dot_cols(benchmark::State& state, GgmlType t, Isa isa, uint64_t bytes, int cols) {
  const TypeKernels* k = kernels_or_skip(state, t, isa, &TypeKernels::vec_dot_cols);
  if (!k) return;
  Fixture f = make_fixture(t, bytes);
  const void* act[kMaxDotCols];
  for (int j = 0; j < kMaxDotCols; ++j) act[j] = f.act.data() + j * f.act_row_bytes;
  float out[kMaxDotCols];
  for (auto _ : state) {
    for (int64_t r = 0; r < f.rows; ++r) {
      k->vec_dot_cols(kRow, f.weights.data() + r * f.row_bytes, act, cols, out);
      benchmark::DoNotOptimize(out);
    }
  }
  report_rates(state, f.rows * f.row_bytes, f.rows * kRow * cols);
}

// The tile GEMM (AMX): kTileRows weight rows against kTileCols positions per
// call, the positions re-laid once (not timed, as matmul does it once per
// position group for every row of the matrix).
void BM_gemm_tile(benchmark::State& state, GgmlType t, Isa isa, uint64_t bytes) {
  const TypeKernels* k = kernels_or_skip(state, t, isa, &TypeKernels::gemm_tile);
  if (!k) return;
  Fixture f = make_fixture(t, bytes);
  std::vector<const void*> act;
  for (int j = 0; j < kTileCols; ++j) act.push_back(f.act.data() + (j % kActRows) * f.act_row_bytes);
  std::vector<TileLine> prepared(tile_prepared_lines(kRow));
  k->prepare_tile(kRow, act.data(), kTileCols, prepared.data());
  std::vector<float> out(static_cast<size_t>(kTileRows * kTileCols));
  const int64_t rows = f.rows / kTileRows * kTileRows;
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; r += kTileRows) {
      k->gemm_tile({.n = kRow,
                    .w = f.weights.data() + r * f.row_bytes,
                    .row_bytes = f.row_bytes,
                    .n_rows = kTileRows,
                    .prepared = prepared.data(),
                    .n_act = kTileCols,
                    .out = out.data(),
                    .out_stride = kTileRows});
      benchmark::DoNotOptimize(out.data());
    }
  }
  report_rates(state, rows * f.row_bytes, rows * kRow * kTileCols);
}

// The packed layout (pack_rows / packed_dot, or prepare_packed once per pass
// and packed_dot_prepared where the kernel has them): the matrix's rows re-laid in
// groups of kPackRows once (not timed, as the engine packs resident weights
// once), then every group against `cols` activation rows per call. cols = 1 is
// decode's GEMV (compare dot/), 4 and 8 prefill's (compare cols4/, cols8/).
// offset: the groups start that many bytes past a 64-byte boundary (32 is what
// GGUF tensors get in place: their data is only 32-byte aligned; packed1o32/).
void BM_packed(benchmark::State& state, GgmlType t, Isa isa, uint64_t bytes, int cols, size_t offset) {
  const TypeKernels* k = kernels_or_skip(state, t, isa, &TypeKernels::packed_dot);
  if (!k) return;
  Fixture f = make_fixture(t, bytes);
  const int64_t groups = std::max<int64_t>(1, f.rows / kPackRows);
  if (f.rows < kPackRows) {
    f.weights.resize(kPackRows * f.row_bytes);
    for (int64_t r = f.rows; r < kPackRows; ++r)
      std::memcpy(f.weights.data() + r * f.row_bytes, f.weights.data(), f.row_bytes);
  }
  const uint64_t group_bytes = kPackRows * f.row_bytes;
  // 64-byte aligned storage, the groups at `offset` past it.
  std::vector<TileLine> storage((groups * group_bytes + offset + sizeof(TileLine) - 1) / sizeof(TileLine));
  auto* packed = reinterpret_cast<uint8_t*>(storage.data()) + offset;
  for (int64_t g = 0; g < groups; ++g)
    k->pack_rows(kRow, f.weights.data() + g * group_bytes, packed + g * group_bytes);
  f.weights = {};
  const void* act[kMaxDotCols];
  for (int j = 0; j < kMaxDotCols; ++j) act[j] = f.act.data() + j * f.act_row_bytes;
  float out[kMaxDotCols * kPackRows];
  // As the engine's matmul: where the kernel prepares the activations, once
  // per pass over the matrix (timed), then every group with them.
  std::vector<int32_t> prepared(static_cast<size_t>(cols * packed_prepared_ints(kRow)));
  const bool prepare = k->prepare_packed && k->packed_dot_prepared;
  for (auto _ : state) {
    if (prepare) k->prepare_packed(kRow, act, cols, prepared.data());
    for (int64_t g = 0; g < groups; ++g) {
      if (prepare) {
        k->packed_dot_prepared(kRow, packed + g * group_bytes, act, prepared.data(), cols, out, kPackRows);
      } else {
        k->packed_dot(kRow, packed + g * group_bytes, act, cols, out, kPackRows);
      }
      benchmark::DoNotOptimize(out);
    }
  }
  report_rates(state, groups * group_bytes, groups * kPackRows * kRow * cols);
}

// pack_rows itself: what a cache miss pays, on a read lane, before a cached
// expert can be used (and --load-all, per expert at load). GB/s of weight
// bytes re-laid, group by group into a second buffer.
void BM_pack(benchmark::State& state, GgmlType t, Isa isa, uint64_t bytes) {
  const TypeKernels* k = kernels_or_skip(state, t, isa, &TypeKernels::pack_rows);
  if (!k) return;
  const Fixture f = make_fixture(t, bytes);
  const int64_t groups = std::max<int64_t>(1, f.rows / kPackRows);
  const uint64_t group_bytes = kPackRows * f.row_bytes;
  if (f.rows < kPackRows) {
    state.SkipWithError("fixture smaller than one group");
    return;
  }
  std::vector<TileLine> storage((groups * group_bytes + sizeof(TileLine) - 1) / sizeof(TileLine));
  auto* packed = reinterpret_cast<uint8_t*>(storage.data());
  for (auto _ : state) {
    for (int64_t g = 0; g < groups; ++g)
      k->pack_rows(kRow, f.weights.data() + g * group_bytes, packed + g * group_bytes);
    benchmark::DoNotOptimize(packed);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * groups * static_cast<int64_t>(group_bytes));
}

void BM_dequant(benchmark::State& state, GgmlType t, Isa isa, uint64_t bytes) {
  const TypeKernels* k = kernels_or_skip(state, t, isa, &TypeKernels::dequantize);
  if (!k) return;
  Fixture f = make_fixture(t, bytes);
  std::vector<float> out(kRow);
  for (auto _ : state) {
    for (int64_t r = 0; r < f.rows; ++r) k->dequantize(f.weights.data() + r * f.row_bytes, out.data(), kRow);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * f.rows * f.row_bytes);
}

// The machine's memory read bandwidth: a sum over a 512 MiB buffer (8 lanes so
// it is load-bound, not latency-bound).
void BM_memory_read(benchmark::State& state) {
  const size_t n = (512u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  for (auto _ : state) {
    uint64_t s[8] = {};
    for (size_t i = 0; i < n; i += 8)
      for (int j = 0; j < 8; ++j) s[j] += buf[i + j];
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * sizeof(uint64_t));
}
BENCHMARK(BM_memory_read)->Unit(benchmark::kMillisecond)->MinTime(1.0);

const GgmlType kBenchTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,  GgmlType::Q4_0,
                                GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,  GgmlType::Q8_0,
                                GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,  GgmlType::Q5_K,
                                GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};

[[maybe_unused]] const bool kRegistered = [] {
  for (GgmlType t : kBenchTypes) {
    if (!is_supported(t)) continue;
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni, Isa::Amx, Isa::Neon}) {
      const TypeKernels* k = kernels_for(t, isa);
      if (!k) continue;
      const std::string base = std::string(ggml_type_name(t)) + "/" + isa_name(isa);
      for (auto [label, bytes] : {std::pair{"l2", uint64_t{256} << 10}, std::pair{"dram", uint64_t{256} << 20}}) {
        if (k->vec_dot)
          benchmark::RegisterBenchmark(("dot/" + base + "/" + label).c_str(), BM_dot, t, isa, bytes)
              ->Unit(benchmark::kMicrosecond);
        if (k->vec_dot_cols)
          for (int cols : {4, kMaxDotCols})
            benchmark::RegisterBenchmark(("cols" + std::to_string(cols) + "/" + base + "/" + label).c_str(),
                                         BM_dot_cols, t, isa, bytes, cols)
                ->Unit(benchmark::kMicrosecond);
        if (k->packed_dot) {
          for (int cols : {1, 4, kMaxDotCols})
            benchmark::RegisterBenchmark(("packed" + std::to_string(cols) + "/" + base + "/" + label).c_str(),
                                         BM_packed, t, isa, bytes, cols, size_t{0})
                ->Unit(benchmark::kMicrosecond);
          benchmark::RegisterBenchmark(("pack/" + base + "/" + label).c_str(), BM_pack, t, isa, bytes)
              ->Unit(benchmark::kMicrosecond);
          for (int cols : {1, 4})  // groups at 32 mod 64, as in place in a GGUF file
            benchmark::RegisterBenchmark(("packed" + std::to_string(cols) + "o32/" + base + "/" + label).c_str(),
                                         BM_packed, t, isa, bytes, cols, size_t{32})
                ->Unit(benchmark::kMicrosecond);
        }
        if (k->gemm_tile)
          benchmark::RegisterBenchmark(("tile16/" + base + "/" + label).c_str(), BM_gemm_tile, t, isa, bytes)
              ->Unit(benchmark::kMicrosecond);
        if (k->dequantize)  // SIMD dequantizers exist only for the hot formats
          benchmark::RegisterBenchmark(("dequant/" + base + "/" + label).c_str(), BM_dequant, t, isa, bytes)
              ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace sluice::kernels

BENCHMARK_MAIN();
