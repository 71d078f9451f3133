// Matrix-vector / matrix-matrix products of a (possibly quantized) weight
// matrix with F32 activations, computed the way llama.cpp's CPU backend does:
// each activation row is first converted once to the weight type's
// vec_dot_type (Q8_0, Q8_K, F16, ... or F32 for F32 weights), then every
// output element is one kernels vec_dot of a weight row with that row.
//
// Prefill (several positions): each weight row is multiplied with up to
// kernels::kMaxDotCols positions per call of the multi-column dot
// (TypeKernels::vec_dot_cols), which decodes the weight block once for all of
// them, and positions are tiled so a tile's converted rows stay in cache.
// Where the weight type has a tile GEMM (TypeKernels::gemm_tile: AMX), blocks
// of kernels::kTileRows rows meet groups of kernels::kTileCols positions
// re-laid once (TiledActivations) instead.
//
// Packed matrices (WeightMatrix::packed: the resident row-interleaved layout
// of kernels/quant.h) are computed a group of kernels::kPackRows rows at a
// time with TypeKernels::packed_dot, for one position (decode) or up to
// kMaxDotCols positions per call (prefill); their n_out % kPackRows tail rows
// are plain and take the paths above. Threads split them at group boundaries;
// a row range that cuts a group (a caller's own split) computes the whole
// group into scratch and keeps only the requested rows.
//
// Determinism: output rows are split across threads, and each output element
// is exactly the value one vec_dot call gives (vec_dot_cols, gemm_tile and
// packed_dot are bit-identical to vec_dot by contract), so results are
// bit-identical for any thread count, tiling, number of positions evaluated
// together, or resident layout (packed or plain).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "model/thread_pool.h"

namespace sluice::model {

// A row-major weight matrix: n_out rows of n_in elements of `type`.
// Non-owning: `data` must outlive every use.
struct WeightMatrix {
  const uint8_t* data = nullptr;
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;
  const kernels::TypeKernels* kern = nullptr;  // kernels_for(type)
  std::string name;                            // for error messages
  // Packed layout (set only when packable(*kern) and the bytes were re-laid by
  // kern->pack_rows): rows [0, packed_rows()) are groups of kPackRows rows,
  // group g at data + g * kPackRows * row_bytes (a group has the byte count
  // of its plain rows); rows from packed_rows() on are plain, so row(r) is
  // valid for them only.
  bool packed = false;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  int64_t packed_rows() const { return packed ? n_out - n_out % kernels::kPackRows : 0; }
  size_t group_bytes() const { return row_bytes * kernels::kPackRows; }
};

// Whether matrices of these kernels can be held packed (pack_rows and
// packed_dot both present; the registry pairs them with vec_dot's ISA).
inline bool packable(const kernels::TypeKernels& k) { return k.pack_rows != nullptr && k.packed_dot != nullptr; }

// The row granularity at which w's rows should be split across threads (speed
// only: a range that cuts a packed group still gives exact values).
inline int64_t row_grain(const WeightMatrix& w) { return w.packed ? kernels::kPackRows : 1; }

// Builds a WeightMatrix over the 2-D slice starting at `data` with ne[0] = n_in,
// ne[1] = n_out. Throws Error("unsupported tensor type X in tensor NAME") when
// sluice has no vec_dot for the type, or when n_in is not a whole number of blocks.
WeightMatrix make_weight(const void* data, GgmlType type, int64_t n_in, int64_t n_out, const std::string& name);

// Activation rows converted to one vec_dot_type. Reusable scratch: quantize()
// only grows the buffer.
class QuantizedRows {
 public:
  // Converts n_rows rows of n_in floats (row i at x + i * x_stride) to `type`.
  void quantize(GgmlType type, const float* x, int64_t n_rows, int64_t n_in, int64_t x_stride, ThreadPool* pool);
  // The same in two steps, for callers that convert rows inside their own
  // parallel_for: prepare() sizes the buffer (throws like quantize), then
  // convert_rows() converts rows [r0, r1) of x; calls on disjoint ranges may
  // run concurrently. Rows not yet converted hold stale bytes.
  void prepare(GgmlType type, int64_t n_rows, int64_t n_in);
  void convert_rows(const float* x, int64_t x_stride, int64_t r0, int64_t r1);
  const void* row(int64_t i) const { return buf_.data() + static_cast<size_t>(i) * row_bytes_; }
  int64_t n_rows() const { return n_rows_; }
  int64_t n_in() const { return n_in_; }
  GgmlType type() const { return type_; }

 private:
  std::vector<uint8_t> buf_;
  GgmlType type_ = GgmlType::F32;
  int64_t n_rows_ = 0;
  int64_t n_in_ = 0;
  size_t row_bytes_ = 0;
  kernels::QuantizeFn quantize_fn_ = nullptr;  // nullptr: F32, rows copied
};

// Activation rows re-laid for a weight type's tile GEMM
// (kernels::TypeKernels::gemm_tile, e.g. AMX): each group of
// kernels::kTileCols positions once, so threads that split the output rows
// share one copy instead of each re-laying every position. Reusable scratch.
class TiledActivations {
 public:
  // Re-lays act (rows of kern's vec_dot_type with n_in elements) for kern's
  // tile kernel; kern must have one. With a pool, groups are re-laid in
  // parallel. Keeps the pointers' targets' values, not the pointers.
  void prepare(const kernels::TypeKernels& kern, int64_t n_in, std::span<const void* const> act, ThreadPool* pool);
  // True when this holds act's rows for n_in-element rows (same count).
  bool holds(int64_t n_in, size_t n_act) const { return n_in == n_in_ && n_act == n_act_; }
  const void* group(int64_t g) const { return &lines_[static_cast<size_t>(g) * group_lines_]; }

 private:
  std::vector<kernels::TileLine> lines_;
  size_t group_lines_ = 0;
  int64_t n_in_ = -1;
  size_t n_act_ = 0;
};

// out[i * out_stride + r] = dot(w.row(r), act[i]) for r < w.n_out, i < act.size().
// Every act[i] must be a row of w.kern->vec_dot_type with w.n_in elements.
void matmul(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride,
            ThreadPool& pool);

// The part of matmul for output rows [r0, r1) only, on the calling thread
// (for callers that fuse several matrices into one parallel_for). Same values
// as matmul.
// `tiled`: act already re-laid for w's tile kernel (speed only; ignored when
// w has none or it does not hold act's shape).
void matmul_rows(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride, int64_t r0,
                 int64_t r1, const TiledActivations* tiled = nullptr);

// Whether splitting work of `multiply_adds` over `n_rows` rows across the pool
// pays for the pool's wake-up. Speed only, never values.
bool worth_parallel(const ThreadPool& pool, int64_t n_rows, int64_t multiply_adds);

// Convenience: converts x (n_rows x w.n_in, contiguous) into `scratch` and
// multiplies; out is n_rows x w.n_out, contiguous.
void matmul_f32(const WeightMatrix& w, const float* x, int64_t n_rows, float* out, ThreadPool& pool,
                QuantizedRows& scratch);

}  // namespace sluice::model
