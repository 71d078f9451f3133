// Q4_K on AMX-INT8 (Isa::Amx): a tile GEMM for prefill, 16 weight rows x 16
// positions per call, and the one-position vec_dot in the same rounding.
//
// Why a rounding of its own: a tdpbusd tile op sums K bytes of a row into one
// int32, so the kernel gets each 32-element run's dot D_r as a whole. The
// AVX2 family keeps eight partial lanes per super-block through its float
// step, which tiles cannot reproduce. Here, per super-block and (row, column):
//   T = sum_r sc_r * D_r,  M = sum_r m_r * S_r   (S_r: the run's activation sum)
// both exact int32 (|T| < 2^25), then
//   acc = fma(y.d * d, float(T), acc),  accm = fma(y.d * dmin, float(M), accm)
// and the result is acc - accm. vec_dot computes T and M with AVX-512 lanes
// (integer sums are exact, so any grouping gives the same T and M) and does the
// same float steps, so every output of the tile kernel equals vec_dot bit for
// bit (tests/unit/kernels_runsum_test.cpp).
//
// Tile use: tmm0-3 hold four runs' 16x16 int32 dots, tmm4-5 the weight runs
// (16 rows x 32 bytes), tmm6-7 the activation runs (8 rows x 64 bytes: 4 bytes
// of each of 16 positions per row, the layout tdpbusd reads). Each thread
// loads this configuration once, on its first call.
// GCC 12 flags the deliberately undefined pass-through operand of its own
// avx512fintrin.h intrinsics (_mm512_undefined_*) as (maybe) uninitialized
// once they are inlined here: a false positive. Set before immintrin.h is
// first included so it covers those lines.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cmath>
#include <cstring>

#include "kernels/blocks_kquant.h"
#include "kernels/kernel_table.h"

namespace sluice::kernels {

namespace {
// Bytes of one super-block in the prepared activations: 8 runs of 8 x 64-byte
// tile rows, then 16 floats y.d, then 4 x 16 int32 (S_2k, S_2k+1) pairs.
constexpr size_t kPreparedTileBytes = 8 * 512;
constexpr size_t kPreparedBlockBytes = kPreparedTileBytes + 16 * sizeof(float) + 4 * 16 * sizeof(int32_t);
}  // namespace

static_assert(kPreparedBlockBytes == kTilePreparedBlockBytes, "the shared size is AMX's layout");
static_assert(kTilePreparedBlockBytes % sizeof(TileLine) == 0, "blocks start on a line: aligned tile loads");

size_t tile_prepared_lines(int64_t n) {
  return static_cast<size_t>(n / kQK_K) * (kTilePreparedBlockBytes / sizeof(TileLine));
}

}  // namespace sluice::kernels

#if defined(__x86_64__)

#include "kernels/x86/kquant_x86_common.h"

namespace sluice::kernels {
namespace {

// Byte offset of run r in a row of unpacked weights: the low nibbles of qs
// (runs 0, 2, 4, 6) come first, then the high nibbles (runs 1, 3, 5, 7).
constexpr int run_offset(int r) { return (r % 2 ? 128 : 0) + 32 * (r / 2); }

SLUICE_AVX512VNNI float vec_dot_q4_k_amx(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  // Lane 0: acc, lane 1: accm (lanes 2, 3 stay 0).
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* wblk = wb + i * static_cast<int64_t>(sizeof(BlockQ4K));
    const kq_x86::K4Block blk = kq_x86::k4_block<false>(wblk);
    uint32_t d_dmin;  // the fp16 pair (d, dmin) -> floats [d, dmin, 0, 0]
    std::memcpy(&d_dmin, wblk, 4);
    const __m128 wd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));
    const __m128i sc_lane = _mm256_castsi256_si128(blk.scales_mins);
    const __m256i sc = _mm256_set_m128i(sc_lane, sc_lane);
    // Eight int32 lanes of scale * (pairwise products), as the AVX2 loops form
    // them; only their total T matters here.
    __m256i sum_lo = _mm256_setzero_si256(), sum_hi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = kq_x86::load256(blk.qs + 32 * c);
      const __m256i p_lo = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), kq_x86::load256(y[i].qs + 64 * c));
      const __m256i p_hi =
          _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), kq_x86::load256(y[i].qs + 64 * c + 32));
      sum_lo = _mm256_dpwssd_epi32(sum_lo, kq_x86::broadcast_scale(sc, 2 * c), p_lo);
      sum_hi = _mm256_dpwssd_epi32(sum_hi, kq_x86::broadcast_scale(sc, 2 * c + 1), p_hi);
    }
    const __m256i bs = kq_x86::load256(y[i].bsums);
    const __m128i sub = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    const __m128i mp = _mm_madd_epi16(_mm256_extracti128_si256(blk.scales_mins, 1), sub);
    // T and M reduced together into lanes 0 and 1.
    const __m256i s8 = _mm256_add_epi32(sum_lo, sum_hi);
    const __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    const __m128i tm = _mm_hadd_epi32(t4, mp);  // T0+T1, T2+T3, M0+M1, M2+M3
    const __m128i r = _mm_hadd_epi32(tm, tm);   // T, M, T, M
    // [acc, accm] = fma([y.d * d, y.d * dmin], [T, M], [acc, accm]).
    acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(y[i].d), wd), _mm_cvtepi32_ps(r), acc);
  }
  return _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_shuffle_ps(acc, acc, 1));
}

// Re-lays n_act (1..16) Q8_K rows for the tile kernel; positions n_act..15
// repeat the last one (their outputs are never written). Per run, the 16
// positions' 32 bytes are a 16 x 8 matrix of int32 that the tile wants
// transposed (tile row k4 = dword k4 of every position): two 8 x 8 int32
// transposes side by side in zmm registers (positions 0-7 in the low 256
// bits, 8-15 in the high).
SLUICE_AVX512VNNI void prepare_tile_q8k(int64_t n, const void* const* act, int n_act, void* prepared) {
  auto* dst = static_cast<uint8_t*>(prepared);
  const BlockQ8K* y[kTileCols];
  for (int j = 0; j < kTileCols; ++j) y[j] = static_cast<const BlockQ8K*>(act[j < n_act ? j : n_act - 1]);
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t* blk = dst + i * static_cast<int64_t>(kPreparedBlockBytes);
    auto* yd = reinterpret_cast<float*>(blk + kPreparedTileBytes);
    auto* spair = reinterpret_cast<int32_t*>(blk + kPreparedTileBytes + 16 * sizeof(float));
    for (int j = 0; j < kTileCols; ++j) {
      yd[j] = y[j][i].d;
      for (int k = 0; k < 4; ++k) {
        const int32_t s0 = y[j][i].bsums[4 * k] + y[j][i].bsums[4 * k + 1];
        const int32_t s1 = y[j][i].bsums[4 * k + 2] + y[j][i].bsums[4 * k + 3];
        spair[16 * k + j] = static_cast<int32_t>((static_cast<uint32_t>(s0) & 0xFFFFu) | (static_cast<uint32_t>(s1) << 16));
      }
    }
    for (int r = 0; r < 8; ++r) {
      __m512i row[8];  // row[j]: dwords of position j | of position j + 8
      for (int j = 0; j < 8; ++j)
        row[j] = _mm512_inserti64x4(_mm512_castsi256_si512(kq_x86::load256(y[j][i].qs + 32 * r)),
                                    kq_x86::load256(y[j + 8][i].qs + 32 * r), 1);
      __m512i t[8], u[8];
      for (int j = 0; j < 8; j += 2) {
        t[j] = _mm512_unpacklo_epi32(row[j], row[j + 1]);
        t[j + 1] = _mm512_unpackhi_epi32(row[j], row[j + 1]);
      }
      for (int j = 0; j < 8; j += 4) {
        u[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);      // dword 0 (and 4) of 4 positions
        u[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);  // dword 1 (and 5)
        u[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);
        u[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);
      }
      uint8_t* tile = blk + r * 512;
      for (int k = 0; k < 4; ++k) {
        _mm512_store_si512(tile + k * 64, _mm512_permutex2var_epi64(u[k], lo_idx, u[k + 4]));
        _mm512_store_si512(tile + (k + 4) * 64, _mm512_permutex2var_epi64(u[k], hi_idx, u[k + 4]));
      }
    }
  }
}

struct TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

SLUICE_AMX void load_tile_config() {
  thread_local bool loaded = false;
  if (loaded) return;
  TileConfig cfg;
  for (int t = 0; t < 4; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;  // C: 16 x 16 int32
  for (int t = 4; t < 6; ++t) cfg.colsb[t] = 32, cfg.rows[t] = 16;  // A: 16 rows x one run
  for (int t = 6; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 8;   // B: one run, 16 positions
  _tile_loadconfig(&cfg);
  loaded = true;
}

SLUICE_AMX void gemm_tile_q4k(const TileGemmCall& call) {
  load_tile_config();
  alignas(64) uint8_t a[kTileRows][256];
  alignas(64) int32_t dots[8][kTileRows][kTileCols];
  // Per-row block data; only rows < n_rows are written and read.
  alignas(64) int32_t sc[kTileRows][8];
  alignas(64) int32_t mpair[kTileRows][4];
  float wd[kTileRows], wdmin[kTileRows];
  // Rows past n_rows enter the tile loads but not the outputs: zero them once.
  if (call.n_rows < kTileRows)
    std::memset(a[call.n_rows], 0, sizeof(a[0]) * static_cast<size_t>(kTileRows - call.n_rows));
  __m512 acc[kTileRows], accm[kTileRows];
  for (int r = 0; r < kTileRows; ++r) acc[r] = accm[r] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const auto* prepared = static_cast<const uint8_t*>(call.prepared);
  for (int64_t i = 0; i < call.n / kQK_K; ++i) {
    for (int row = 0; row < call.n_rows; ++row) {
      const kq_x86::K4Block blk = kq_x86::k4_block<false>(call.w + row * call.row_bytes +
                                                          i * static_cast<int64_t>(sizeof(BlockQ4K)));
      wd[row] = blk.d;
      wdmin[row] = blk.dmin;
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc[row]),
                         _mm256_cvtepu16_epi32(_mm256_castsi256_si128(blk.scales_mins)));
      // The 8 int16 mins are the 4 (m_2k, m_2k+1) pairs.
      _mm_store_si128(reinterpret_cast<__m128i*>(mpair[row]), _mm256_extracti128_si256(blk.scales_mins, 1));
      const __m512i q0 = _mm512_loadu_si512(blk.qs), q1 = _mm512_loadu_si512(blk.qs + 64);
      _mm512_store_si512(&a[row][0], _mm512_and_si512(q0, m4));
      _mm512_store_si512(&a[row][64], _mm512_and_si512(q1, m4));
      _mm512_store_si512(&a[row][128], _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4));
      _mm512_store_si512(&a[row][192], _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4));
    }
    const uint8_t* blk = prepared + i * static_cast<int64_t>(kPreparedBlockBytes);
    for (int r0 = 0; r0 < 8; r0 += 4) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      _tile_loadd(4, &a[0][run_offset(r0)], 256);
      _tile_loadd(6, blk + r0 * 512, 64);
      _tile_dpbusd(0, 4, 6);
      _tile_loadd(5, &a[0][run_offset(r0 + 1)], 256);
      _tile_loadd(7, blk + (r0 + 1) * 512, 64);
      _tile_dpbusd(1, 5, 7);
      _tile_loadd(4, &a[0][run_offset(r0 + 2)], 256);
      _tile_loadd(6, blk + (r0 + 2) * 512, 64);
      _tile_dpbusd(2, 4, 6);
      _tile_loadd(5, &a[0][run_offset(r0 + 3)], 256);
      _tile_loadd(7, blk + (r0 + 3) * 512, 64);
      _tile_dpbusd(3, 5, 7);
      _tile_stored(0, dots[r0], 64);
      _tile_stored(1, dots[r0 + 1], 64);
      _tile_stored(2, dots[r0 + 2], 64);
      _tile_stored(3, dots[r0 + 3], 64);
    }
    const __m512 yd = _mm512_loadu_ps(reinterpret_cast<const float*>(blk + kPreparedTileBytes));
    const auto* spair = reinterpret_cast<const int32_t*>(blk + kPreparedTileBytes + 16 * sizeof(float));
    for (int row = 0; row < call.n_rows; ++row) {
      __m512i t = _mm512_mullo_epi32(_mm512_load_si512(dots[0][row]), _mm512_set1_epi32(sc[row][0]));
#pragma GCC unroll 7
      for (int r = 1; r < 8; ++r)
        t = _mm512_add_epi32(t, _mm512_mullo_epi32(_mm512_load_si512(dots[r][row]), _mm512_set1_epi32(sc[row][r])));
      __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)
        m = _mm512_dpwssd_epi32(m, _mm512_loadu_si512(spair + 16 * k), _mm512_set1_epi32(mpair[row][k]));
      acc[row] = _mm512_fmadd_ps(_mm512_mul_ps(yd, _mm512_set1_ps(wd[row])), _mm512_cvtepi32_ps(t), acc[row]);
      accm[row] = _mm512_fmadd_ps(_mm512_mul_ps(yd, _mm512_set1_ps(wdmin[row])), _mm512_cvtepi32_ps(m), accm[row]);
    }
  }
  for (int row = 0; row < call.n_rows; ++row) {
    alignas(64) float o[kTileCols];
    _mm512_store_ps(o, _mm512_sub_ps(acc[row], accm[row]));
    for (int j = 0; j < call.n_act; ++j) call.out[j * call.out_stride + row] = o[j];
  }
}

}  // namespace

void fill_amx_q4k(KernelTable& table) {
  TypeKernels& k = table[static_cast<uint32_t>(GgmlType::Q4_K)];
  k.vec_dot = vec_dot_q4_k_amx;
  k.vec_dot_type = GgmlType::Q8_K;
  k.prepare_tile = prepare_tile_q8k;
  k.gemm_tile = gemm_tile_q4k;
}

}  // namespace sluice::kernels

#endif  // __x86_64__
