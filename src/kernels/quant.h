// Quantized-format kernels: dequantize, quantize, and the fused dot product of
// a weight row with an activation row quantized to the weight's vec_dot_type.
//
// Contracts (every implementation, every ISA):
//  - n is the element count of the row and must be a multiple of the type's
//    block size (callers guarantee it; kernels do not check).
//  - dequantize/quantize/vec_dot are pure functions of their inputs; they are
//    thread-safe and allocate nothing.
//  - vec_dot(n, w, a) returns sum_i dequant(w)[i] * dequant(a)[i], where `a` is
//    a row of `vec_dot_type` blocks (e.g. Q8_0 for Q4_0 weights, Q8_K for
//    K-quants, F32 for F32). The scalar version is the reference; SIMD versions
//    match it within a documented tolerance (tests/unit/kernels_*.cpp).
//  - For a given (type, isa) the result is deterministic (fixed summation order).
#pragma once

#include <cstdint>

#include "util/ggml_type.h"

namespace sluice::kernels {

// Kernel sets. A later value overrides an earlier one in kernels_for(t) where
// both are available. AvxVnni = Avx2 plus AVX-VNNI (vpdpbusd/vpdpwssd);
// Avx512Vnni = Avx2 plus AVX-512 F/BW/VL/VNNI (512-bit integer multiply-adds,
// 32 registers; used for the K-quant prefill dots, and for Q4_0, Q5_0, Q8_0,
// IQ4_NL and MXFP4 with the packed layout below). Their entries are partial
// (only the integer dot products and the packed layout). AvxVnni's entries
// are BIT-IDENTICAL to the Avx2 entry of the same type, and so are
// Avx512Vnni's K-quant ones. Avx512Vnni's symmetric legacy formats (Q4_0,
// Q5_0, Q8_0, IQ4_NL, MXFP4) have a rounding of their own, the block-sum
// rounding: per block b the exact integer S_b of its 32 level products, then
// acc[b % 2] = fma(scale(w_b) * fp16(a_b.d), float(S_b), acc[b % 2]) in block
// order from +0, and acc[0] + acc[1]; Avx2 keeps eight int32 lanes per block,
// each converted and accumulated in float. The block sum is what the packed
// layout's 16-row kernel can keep at one vector FMA per block (per lane it
// cost two more vector ops per multiply-add, and half the prefill speed). So
// on these formats an AVX-512 VNNI machine's logits differ from an AVX2
// one's in float rounding only, as an AMX machine's do on Q4_K.
// Amx = Avx512Vnni plus AMX-INT8 tiles, for Q4_K only, with its own rounding:
// per super-block the dot of each 32-element run is one exact integer, the
// scaled runs and the mins term are summed exactly, and one float step
// follows (acc = fma(y.d * d, T, acc), the same for the mins). That is the
// rounding the tile kernel can keep; all of this set's Q4_K functions agree
// with it bit for bit, and it differs from Avx2's only in float rounding.
// NeonI8mm = Neon plus the armv8.6 int8 matrix multiply (smmla) and the dot
// product, for Q4_K only, in Amx's rounding (smmla, like a tile op, sums eight
// products into one int32): on such a CPU Q4_K gives the Amx tier's bits.
enum class Isa { Scalar = 0, Avx2 = 1, Neon = 2, AvxVnni = 3, Avx512Vnni = 4, Amx = 5, NeonI8mm = 6 };
inline constexpr int kIsaCount = 7;
const char* isa_name(Isa isa);

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
using VecDotFn = float (*)(int64_t n, const void* w, const void* act);
// Multi-column dot: out[j] = vec_dot(n, w, act[j]) for 0 <= j < n_act, with
// 1 <= n_act <= kMaxDotCols. One weight row against several activation rows
// (positions), so the weight row is loaded and decoded once per call instead of
// once per position. Contract: each out[j] is BIT-IDENTICAL to the vec_dot of
// the same TypeKernels entry (same per-output summation order), so callers may
// mix the two paths freely without affecting results.
using VecDotColsFn = void (*)(int64_t n, const void* w, const void* const* act, int n_act, float* out);
inline constexpr int kMaxDotCols = 8;

// Tile GEMM (AMX, NEON i8mm): up to kTileRows weight rows against up to kTileCols
// positions per call, the positions' activations re-laid once by
// prepare_tile into `prepared` (tile_prepared_lines(n) TileLines).
// Contract: out[j * out_stride + r] is BIT-IDENTICAL to
// vec_dot(n, w + r * row_bytes, act[j]) of the same entry, for r < n_rows and
// j < n_act; nothing else is written. Uses the calling thread's tile state.
inline constexpr int kTileRows = 16;
inline constexpr int kTileCols = 16;
struct TileGemmCall {
  int64_t n = 0;                // elements per row
  const uint8_t* w = nullptr;   // first weight row
  size_t row_bytes = 0;         // weight row stride
  int n_rows = 0;               // 1..kTileRows
  const void* prepared = nullptr;
  int n_act = 0;                // 1..kTileCols, as given to prepare_tile
  float* out = nullptr;
  int64_t out_stride = 0;       // floats between consecutive positions' outputs
};
using PrepareTileFn = void (*)(int64_t n, const void* const* act, int n_act, void* prepared);
using TileGemmFn = void (*)(const TileGemmCall& call);
// Storage unit of prepared activations: tile loads want 64-byte alignment, which
// a std::vector<TileLine> gives.
struct alignas(64) TileLine {
  uint8_t bytes[64];
};
// TileLines prepare_tile writes for n-element rows (any n_act).
size_t tile_prepared_lines(int64_t n);

// Row-interleaved resident layout ("packed"): kPackRows consecutive weight
// rows of one matrix re-laid into one group of exactly the same byte count, so
// that one vector load feeds every row of the group and per-block scales of
// all rows are combined in one vector op. Only weights that stay in memory are
// packed (dense weights read into anonymous memory, cached and --load-all
// experts, and streamed experts a prompt batch uses several times), once,
// when they arrive. The layout is
// private to the ISA that defines it: pack_rows and packed_dot always come from
// one TypeKernels entry, and the bytes pack_rows writes are only ever read by
// that entry's packed_dot.
inline constexpr int kPackRows = 16;
// Re-lays kPackRows plain rows of n elements (row r at src + r * row_bytes,
// row_bytes = the type's row size for n) into dst, kPackRows * row_bytes bytes.
// src and dst must not overlap. Pure; allocates nothing. The bytes written may
// depend on dst's address mod 64 (so that a kernel's wide loads are aligned
// wherever the group lies): packed_dot must get them at an address equal to
// dst mod 64 (moving a packed group by a multiple of 64 bytes is fine).
using PackRowsFn = void (*)(int64_t n, const void* src, void* dst);
// One packed group against up to kMaxDotCols activation rows:
// out[j * out_stride + r] = vec_dot(n, plain row r, act[j]) for r < kPackRows,
// 1 <= n_act <= kMaxDotCols, BIT-IDENTICAL to the vec_dot of the same entry
// (same contract as vec_dot_cols), so packing never changes a result. (The
// x86 kernels, like the per-row ones' exactness, rely on Q8_0 activations
// holding no -128, which the quantizers never write: legacy_impl.h.)
using PackedDotFn = void (*)(int64_t n, const void* packed, const void* const* act, int n_act, float* out,
                             int64_t out_stride);
// Optional, with packed_dot (both or neither): the part of packed_dot's work
// that depends only on the activation rows (the legacy formats' per-block
// activation sums), done once per matrix instead of once per group.
// prepare_packed writes packed_prepared_ints(n) int32 per row for n_act >= 1
// rows (row j at prepared + j * packed_prepared_ints(n));
// packed_dot_prepared is packed_dot given the prepared ints of exactly its
// act rows, with the same results bit for bit.
using PreparePackedFn = void (*)(int64_t n, const void* const* act, int n_act, int32_t* prepared);
using PackedDotPreparedFn = void (*)(int64_t n, const void* packed, const void* const* act, const int32_t* prepared,
                                     int n_act, float* out, int64_t out_stride);
inline int64_t packed_prepared_ints(int64_t n) { return n / 32; }  // one per 32-element block

struct TypeKernels {
  DequantizeFn dequantize = nullptr;  // every supported weight type
  QuantizeFn quantize = nullptr;      // types we write, and every vec_dot_type
  VecDotFn vec_dot = nullptr;         // every supported weight type
  GgmlType vec_dot_type = GgmlType::F32;
  // Optional (nullptr = not available; use dot_cols() below, which falls back
  // to a loop over vec_dot). The registry only pairs it with the vec_dot of the
  // same ISA, which is what makes the bit-identity contract hold.
  VecDotColsFn vec_dot_cols = nullptr;
  // Optional tile GEMM (both or neither; same ISA as vec_dot, like
  // vec_dot_cols).
  PrepareTileFn prepare_tile = nullptr;
  TileGemmFn gemm_tile = nullptr;
  // Optional packed layout (both or neither; same ISA as vec_dot).
  PackRowsFn pack_rows = nullptr;
  PackedDotFn packed_dot = nullptr;
  PreparePackedFn prepare_packed = nullptr;  // optional, with packed_dot_prepared
  PackedDotPreparedFn packed_dot_prepared = nullptr;
};

// out[j] = k.vec_dot(n, w, act[j]) for j < n_act (any n_act >= 0), through
// k.vec_dot_cols in groups of kMaxDotCols when available, else one vec_dot per
// column. Results are the same either way.
void dot_cols(const TypeKernels& k, int64_t n, const void* w, const void* const* act, int n_act, float* out);

// The fastest kernels this CPU runs for type t (chosen once, thread-safe).
// Throws sluice::Error("unsupported tensor type X") if t has no kernels at all.
// Activation-only types (Q8_1, Q8_K) have quantize but no vec_dot: check
// is_supported() before treating a type as a weight format.
const TypeKernels& kernels_for(GgmlType t);

// One specific implementation: nullptr when that ISA has no version of t or the
// CPU lacks the ISA. Entries may be partial (e.g. AVX2 with only vec_dot);
// missing functions are nullptr. Used by tests and benchmarks.
const TypeKernels* kernels_for(GgmlType t, Isa isa);

// True if sluice can compute with weights of type t (dequantize + vec_dot).
bool is_supported(GgmlType t);

// The ISA used by kernels_for(t) for vec_dot, for telemetry.
Isa best_isa();

// Convenience wrappers over kernels_for(t).
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);  // throws if t is not writable

}  // namespace sluice::kernels
