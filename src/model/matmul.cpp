#include "model/matmul.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"
#include "util/prefetch.h"

namespace sluice::model {
namespace {

// Below this many multiply-adds a parallel_for costs more than it saves: a
// pool round trip costs ~3-15 us on a busy 2-core machine (wake-up of the
// worker), while the AVX2 kernels do ~20-40 multiply-adds per ns, so 512K is
// ~15-25 us of work. Only affects speed: the values are the same either way.
constexpr int64_t kMinParallelWork = 512 * 1024;
// Same for converting activations (a few ns per element with its rounding).
constexpr int64_t kMinParallelQuantize = 64 * 1024;

// Positions per tile in matmul: a tile's converted activation rows should
// stay in L1 while every weight row of the thread's range passes over them
// (each weight row is read once per tile, from L2; each activation byte is
// used by one weight row per load, so it must come from L1 for the dot to be
// compute-bound). Only affects speed.
constexpr size_t kTileActivationBytes = 32 * 1024;
constexpr int64_t kMinPositionTile = 2 * kernels::kMaxDotCols;
constexpr int64_t kMaxPositionTile = 64;
// Weight rows per block: a block is read from memory once and then from L2
// for every position tile. Only affects speed.
constexpr size_t kRowBlockBytes = 256 * 1024;
// Position groups re-laid per thread before TiledActivations::prepare splits
// them over the pool (each is ~3 us for a 2048-wide row). Speed only.
constexpr int64_t kMinParallelTileGroups = 4;
// Decode: how far ahead of the row being computed to hint the next weight
// row into cache. Only affects speed.
constexpr int64_t kPrefetchAheadBytes = 4096;

int64_t position_tile(size_t act_row_bytes) {
  int64_t tile = static_cast<int64_t>(kTileActivationBytes / std::max<size_t>(act_row_bytes, 1));
  tile -= tile % kernels::kMaxDotCols;
  return std::clamp(tile, kMinPositionTile, kMaxPositionTile);
}

// The tile-GEMM path (AMX): every kTileRows rows of [r0, r1) pass over each
// group of kTileCols re-laid positions. Each output is its vec_dot's value
// (quant.h contract), so neither the grouping nor the split changes one.
void matmul_tiles(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride,
                  int64_t r0, int64_t r1, const TiledActivations& tiled) {
  const kernels::TypeKernels& kern = *w.kern;
  const int64_t n_act = static_cast<int64_t>(act.size());
  // Rows outer: a block of weight rows comes from memory once and meets every
  // position group from cache (the re-laid groups are ~35 KiB each for a
  // 2048-wide row, so a prompt's worth stays in L2).
  for (int64_t r = r0; r < r1; r += kernels::kTileRows) {
    for (int64_t p0 = 0; p0 < n_act; p0 += kernels::kTileCols) {
      kern.gemm_tile({.n = w.n_in,
                      .w = w.row(r),
                      .row_bytes = w.row_bytes,
                      .n_rows = static_cast<int>(std::min<int64_t>(kernels::kTileRows, r1 - r)),
                      .prepared = tiled.group(p0 / kernels::kTileCols),
                      .n_act = static_cast<int>(std::min<int64_t>(kernels::kTileCols, n_act - p0)),
                      .out = out + p0 * out_stride + r,
                      .out_stride = out_stride});
    }
  }
}

}  // namespace

WeightMatrix make_weight(const void* data, GgmlType type, int64_t n_in, int64_t n_out, const std::string& name) {
  if (!kernels::is_supported(type))
    throw Error("unsupported tensor type " + std::string(ggml_type_name(type)) + " in tensor " + name);
  const auto rb = ggml_row_bytes(type, static_cast<uint64_t>(n_in));
  if (!rb)
    throw Error("tensor " + name + ": row length " + std::to_string(n_in) + " is not a multiple of the " +
                std::string(ggml_type_name(type)) + " block size");
  WeightMatrix w;
  w.data = static_cast<const uint8_t*>(data);
  w.type = type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = static_cast<size_t>(*rb);
  w.kern = &kernels::kernels_for(type);
  w.name = name;
  if (!w.kern->vec_dot)
    throw Error("unsupported tensor type " + std::string(ggml_type_name(type)) + " in tensor " + name);
  const auto ab = ggml_row_bytes(w.kern->vec_dot_type, static_cast<uint64_t>(n_in));
  if (!ab)
    throw Error("tensor " + name + ": row length " + std::to_string(n_in) + " cannot be converted to " +
                std::string(ggml_type_name(w.kern->vec_dot_type)));
  return w;
}

void QuantizedRows::prepare(GgmlType type, int64_t n_rows, int64_t n_in) {
  const auto rb = ggml_row_bytes(type, static_cast<uint64_t>(n_in));
  if (!rb) throw Error("activation row of " + std::to_string(n_in) + " elements is not a whole number of " +
                       std::string(ggml_type_name(type)) + " blocks");
  quantize_fn_ = nullptr;
  if (type != GgmlType::F32) {  // F32 weights take F32 activations unchanged
    quantize_fn_ = kernels::kernels_for(type).quantize;
    if (!quantize_fn_) throw Error("no activation conversion to " + std::string(ggml_type_name(type)));
  }
  type_ = type;
  n_rows_ = n_rows;
  n_in_ = n_in;
  row_bytes_ = static_cast<size_t>(*rb);
  const size_t need = row_bytes_ * static_cast<size_t>(n_rows);
  if (buf_.size() < need) buf_.resize(need);
}

void QuantizedRows::convert_rows(const float* x, int64_t x_stride, int64_t r0, int64_t r1) {
  uint8_t* dst = buf_.data();
  for (int64_t i = r0; i < r1; ++i) {
    if (quantize_fn_) {
      quantize_fn_(x + i * x_stride, dst + i * row_bytes_, n_in_);
    } else {
      std::memcpy(dst + i * row_bytes_, x + i * x_stride, row_bytes_);
    }
  }
}

void QuantizedRows::quantize(GgmlType type, const float* x, int64_t n_rows, int64_t n_in, int64_t x_stride,
                             ThreadPool* pool) {
  prepare(type, n_rows, n_in);
  auto body = [&](int64_t b, int64_t e) { convert_rows(x, x_stride, b, e); };
  if (type != GgmlType::F32 && pool && pool->size() > 1 && n_rows > 1 && n_rows * n_in >= kMinParallelQuantize) {
    pool->parallel_for(n_rows, body);
  } else {
    body(0, n_rows);
  }
}

void TiledActivations::prepare(const kernels::TypeKernels& kern, int64_t n_in, std::span<const void* const> act,
                               ThreadPool* pool) {
  const int64_t n_act = static_cast<int64_t>(act.size());
  const int64_t groups = (n_act + kernels::kTileCols - 1) / kernels::kTileCols;
  group_lines_ = kernels::tile_prepared_lines(n_in);
  const size_t need = group_lines_ * static_cast<size_t>(groups);
  if (lines_.size() < need) lines_.resize(need);
  n_in_ = n_in;
  n_act_ = act.size();
  auto body = [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t p0 = g * kernels::kTileCols;
      const int m = static_cast<int>(std::min<int64_t>(kernels::kTileCols, n_act - p0));
      kern.prepare_tile(n_in, act.data() + p0, m, &lines_[static_cast<size_t>(g) * group_lines_]);
    }
  };
  // A group takes a few microseconds, about a pool round trip: split only
  // when every thread gets several.
  if (pool && pool->size() > 1 && groups >= kMinParallelTileGroups * pool->size()) {
    pool->parallel_for(groups, body);
  } else {
    body(0, groups);
  }
}

namespace {

// Rows [r0, r1) of w, which must be plain there: vec_dot (decode), the tile
// GEMM, or the multi-column dot.
void plain_rows(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride, int64_t r0,
                int64_t r1, const TiledActivations* tiled) {
  const int64_t n_act = static_cast<int64_t>(act.size());
  const kernels::TypeKernels& kern = *w.kern;
  const int64_t n_in = w.n_in;
  const void* const* acts = act.data();
  if (n_act == 1) {  // one position (decode): plain vec_dot, the same values
    // Decode streams every weight row once from DRAM, and one row (~1 KiB for
    // a 2048-wide Q4_K) is too short for the hardware prefetcher to ramp up
    // before the next call: hint the row kPrefetchAheadBytes on so its lines
    // are in flight while this one is computed. Speed only.
    const int64_t ahead = std::max<int64_t>(1, kPrefetchAheadBytes / std::max<int64_t>(1, static_cast<int64_t>(w.row_bytes)));
    for (int64_t r = r0; r < r1; ++r) {
      if (r + ahead < r1) prefetch_bytes(w.row(r + ahead), w.row_bytes);
      out[r] = kern.vec_dot(n_in, w.row(r), acts[0]);
    }
    return;
  }
  if (kern.gemm_tile) {
    if (tiled && tiled->holds(n_in, act.size())) {
      matmul_tiles(w, act, out, out_stride, r0, r1, *tiled);
    } else {
      thread_local TiledActivations local;
      local.prepare(kern, n_in, act, nullptr);
      matmul_tiles(w, act, out, out_stride, r0, r1, local);
    }
    return;
  }
  // Loop nest (speed only): weight rows in blocks that stay in L2, positions
  // in tiles whose converted rows stay in L1, and inside a tile kMaxDotCols
  // positions at a time through the multi-column dot, which decodes each
  // weight block once for all of them. Every output element is the same
  // vec_dot result whichever path, block or tile computes it (quant.h
  // contract), so the result is independent of blocking and of the thread
  // split.
  float col[kernels::kMaxDotCols];
  const auto act_row_bytes = ggml_row_bytes(kern.vec_dot_type, static_cast<uint64_t>(n_in));
  const int64_t tile = position_tile(static_cast<size_t>(act_row_bytes.value_or(0)));
  const int64_t row_block = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / std::max<size_t>(w.row_bytes, 1)));
  for (int64_t b0 = r0; b0 < r1; b0 += row_block) {
    const int64_t b1 = std::min(r1, b0 + row_block);
    for (int64_t p0 = 0; p0 < n_act; p0 += tile) {
      const int64_t p1 = std::min(n_act, p0 + tile);
      for (int64_t r = b0; r < b1; ++r) {
        const uint8_t* wr = w.row(r);
        for (int64_t i = p0; i < p1; i += kernels::kMaxDotCols) {
          const int m = static_cast<int>(std::min<int64_t>(kernels::kMaxDotCols, p1 - i));
          kernels::dot_cols(kern, n_in, wr, acts + i, m, col);
          for (int j = 0; j < m; ++j) out[(i + j) * out_stride + r] = col[j];
        }
      }
    }
  }
}

// One packed group g of w against positions [i, i + m) (m <= kMaxDotCols),
// written to the rows of [r0, r1) it holds. A group wholly inside the range
// is written in place; one the range cuts is computed whole into scratch and
// only the requested rows copied out (each value is the same either way).
// prepared: the kernel's prepare_packed ints of acts[0..m), or null.
inline void packed_group(const WeightMatrix& w, int64_t g, const void* const* acts, const int32_t* prepared, int m,
                         float* out, int64_t out_stride, int64_t r0, int64_t r1) {
  constexpr int64_t G = kernels::kPackRows;
  const int64_t first = g * G;
  const uint8_t* src = w.data + static_cast<size_t>(g) * w.group_bytes();
  auto dot = [&](float* dst, int64_t stride) {
    if (prepared) {
      w.kern->packed_dot_prepared(w.n_in, src, acts, prepared, m, dst, stride);
    } else {
      w.kern->packed_dot(w.n_in, src, acts, m, dst, stride);
    }
  };
  if (first >= r0 && first + G <= r1) {
    dot(out + first, out_stride);
    return;
  }
  float scratch[kernels::kMaxDotCols * G];
  dot(scratch, G);
  const int64_t lo = std::max(r0, first), hi = std::min(r1, first + G);
  for (int j = 0; j < m; ++j)
    for (int64_t r = lo; r < hi; ++r) out[j * out_stride + r] = scratch[j * G + (r - first)];
}

// Rows [r0, r1) of a packed w: its groups through packed_dot, its plain tail
// through plain_rows. Same loop nest as the plain multi-column path (groups
// in blocks that stay in L2, positions in tiles that stay in L1); speed only.
void packed_rows(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride, int64_t r0,
                 int64_t r1, const TiledActivations* tiled) {
  constexpr int64_t G = kernels::kPackRows;
  const int64_t pr = w.packed_rows();
  if (r1 > pr) plain_rows(w, act, out, out_stride, std::max(r0, pr), r1, tiled);
  if (r0 >= pr) return;
  const int64_t g0 = r0 / G, g1 = (std::min(r1, pr) + G - 1) / G;
  const int64_t n_act = static_cast<int64_t>(act.size());
  const void* const* acts = act.data();
  const size_t gb = w.group_bytes();
  // What the kernel needs of the activations alone, once for all groups
  // (this thread's; another thread of the same matmul prepares its own copy).
  thread_local std::vector<int32_t> prepared_store;
  const int32_t* prepared = nullptr;
  const int64_t per_act = kernels::packed_prepared_ints(w.n_in);
  if (w.kern->prepare_packed && w.kern->packed_dot_prepared) {
    prepared_store.resize(static_cast<size_t>(n_act * per_act));
    w.kern->prepare_packed(w.n_in, acts, static_cast<int>(n_act), prepared_store.data());
    prepared = prepared_store.data();
  }
  auto prepared_of = [&](int64_t i) { return prepared ? prepared + i * per_act : nullptr; };
  if (n_act == 1) {  // decode: the packed kernels prefetch their own stream, across groups too
    for (int64_t g = g0; g < g1; ++g) {
      packed_group(w, g, acts, prepared, 1, out, out_stride, r0, r1);
    }
    return;
  }
  const auto act_row_bytes = ggml_row_bytes(w.kern->vec_dot_type, static_cast<uint64_t>(w.n_in));
  const int64_t tile = position_tile(static_cast<size_t>(act_row_bytes.value_or(0)));
  const int64_t group_block = std::max<int64_t>(1, static_cast<int64_t>(kRowBlockBytes / std::max<size_t>(gb, 1)));
  for (int64_t b0 = g0; b0 < g1; b0 += group_block) {
    const int64_t b1 = std::min(g1, b0 + group_block);
    for (int64_t p0 = 0; p0 < n_act; p0 += tile) {
      const int64_t p1 = std::min(n_act, p0 + tile);
      for (int64_t g = b0; g < b1; ++g) {
        for (int64_t i = p0; i < p1; i += kernels::kMaxDotCols) {
          const int m = static_cast<int>(std::min<int64_t>(kernels::kMaxDotCols, p1 - i));
          packed_group(w, g, acts + i, prepared_of(i), m, out + i * out_stride, out_stride, r0, r1);
        }
      }
    }
  }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride, int64_t r0,
                 int64_t r1, const TiledActivations* tiled) {
  if (act.empty() || r0 >= r1) return;
  if (w.packed) {
    packed_rows(w, act, out, out_stride, r0, r1, tiled);
  } else {
    plain_rows(w, act, out, out_stride, r0, r1, tiled);
  }
}

bool worth_parallel(const ThreadPool& pool, int64_t n_rows, int64_t multiply_adds) {
  return pool.size() > 1 && n_rows > 1 && multiply_adds >= kMinParallelWork;
}

void matmul(const WeightMatrix& w, std::span<const void* const> act, float* out, int64_t out_stride,
            ThreadPool& pool) {
  const int64_t n_act = static_cast<int64_t>(act.size());
  if (n_act == 0 || w.n_out == 0) return;
  const TiledActivations* tiled = nullptr;
  thread_local TiledActivations shared;  // the caller's; workers only read it
  if (w.kern->gemm_tile && n_act > 1 && !w.packed) {  // packed: only a short plain tail might use tiles
    shared.prepare(*w.kern, w.n_in, act, &pool);
    tiled = &shared;
  }
  auto body = [&](int64_t r0, int64_t r1) { matmul_rows(w, act, out, out_stride, r0, r1, tiled); };
  if (worth_parallel(pool, w.n_out, w.n_out * w.n_in * n_act)) {
    pool.parallel_for(w.n_out, body, row_grain(w));  // packed: ranges start at group boundaries
  } else {
    body(0, w.n_out);
  }
}

void matmul_f32(const WeightMatrix& w, const float* x, int64_t n_rows, float* out, ThreadPool& pool,
                QuantizedRows& scratch) {
  scratch.quantize(w.kern->vec_dot_type, x, n_rows, w.n_in, w.n_in, &pool);
  std::vector<const void*> rows(static_cast<size_t>(n_rows));
  for (int64_t i = 0; i < n_rows; ++i) rows[i] = scratch.row(i);
  matmul(w, rows, out, w.n_out, pool);
}

}  // namespace sluice::model
