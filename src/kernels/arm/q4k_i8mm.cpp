// Q4_K on the int8 matrix multiply (Isa::NeonI8mm: armv8.2-a dotprod + i8mm,
// Cortex-A510/A710/X2 and later): a tile GEMM for prefill, two weight rows by
// two positions per smmla, and the one-position vec_dot in the same rounding.
//
// Why a rounding of its own: smmla sums eight byte products into one int32,
// so the four-product lanes that Isa::Neon keeps to give x86 AVX2's bits are
// out of its reach. Like the AMX tile GEMM (quant.h, x86/q4k_amx.cpp), per
// super-block and (row, position) it forms the exact integers
//   T = sum_r sc_r * D_r,  M = sum_r m_r * S_r
// (D_r: run r's 32-product dot, S_r: the run's activation sum; |T| < 2^25),
// then acc = fma(y.d * d, float(T), acc), accm = fma(y.d * dmin, float(M), accm),
// and the result is acc - accm: the AMX tier's bits. Integer sums are exact
// in any grouping, so vec_dot (sdot) and the tile kernel (smmla) agree bit for
// bit (tests/unit/kernels_runsum_test.cpp), and micro-batch size and threads
// change nothing.
//
// Prepared activations of one call (prepare_tile), per super-block,
// kTilePreparedBlockBytes: for each pair of positions (2p, 2p+1) their 256
// quants interleaved eight bytes at a time (16 bytes = smmla's 8x2 operand),
// 512 bytes a pair; then the 16 positions' y.d; then per position the eight
// run sums S_r as int16. A missing odd position is zeros.
#include "kernels/kernel_table.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "kernels/arm/k4_neon.h"
#include "kernels/blocks_kquant.h"

namespace sluice::kernels {
namespace {

#define SLUICE_I8MM_TARGET __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))

constexpr size_t kPairBytes = 2 * kQK_K;                 // two positions' quants
constexpr size_t kDOffset = (kTileCols / 2) * kPairBytes;  // 16 floats y.d
constexpr size_t kSumsOffset = kDOffset + kTileCols * sizeof(float);
constexpr size_t kLayoutBytes = kSumsOffset + kTileCols * 8 * sizeof(int16_t);
static_assert(kLayoutBytes <= kTilePreparedBlockBytes, "the layout fits the shared prepared block size");

// Run pair (2c, 2c+1) of one 32-byte chunk of quants against its 64
// activations: T += sc[2c] * D_2c + sc[2c+1] * D_2c+1 in four int32 lanes
// whose sum is what counts (sdot groups four products a lane; all exact).
template <int c>
SLUICE_I8MM_TARGET inline int32x4_t chunk_t(int32x4_t t, const uint8_t* qs, const int8_t* yq, int32x4_t sc_lo,
                                            int32x4_t sc_hi) {
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const uint8x16x2_t q = vld1q_u8_x2(qs + 32 * c);
  const int8x16x4_t y = vld1q_s8_x4(yq + 64 * c);
  const int32x4_t zero = vdupq_n_s32(0);
  const int32x4_t d_lo = vdotq_s32(vdotq_s32(zero, vreinterpretq_s8_u8(vandq_u8(q.val[0], m4)), y.val[0]),
                                   vreinterpretq_s8_u8(vandq_u8(q.val[1], m4)), y.val[1]);
  const int32x4_t d_hi = vdotq_s32(vdotq_s32(zero, vreinterpretq_s8_u8(vshrq_n_u8(q.val[0], 4)), y.val[2]),
                                   vreinterpretq_s8_u8(vshrq_n_u8(q.val[1], 4)), y.val[3]);
  if constexpr (c < 2) {
    t = vmlaq_laneq_s32(t, d_lo, sc_lo, 2 * c);
    return vmlaq_laneq_s32(t, d_hi, sc_lo, 2 * c + 1);
  } else {
    t = vmlaq_laneq_s32(t, d_lo, sc_hi, 2 * c - 4);
    return vmlaq_laneq_s32(t, d_hi, sc_hi, 2 * c - 3);
  }
}

// M = sum_r m_r * S_r for one row's mins and one position's run sums, in four
// int32 lanes (S_r = bsums[2r] + bsums[2r+1]).
SLUICE_I8MM_TARGET inline int32x4_t mins_m(int16x8_t mins, int16x8_t sums) {
  return vmlal_high_s16(vmull_s16(vget_low_s16(mins), vget_low_s16(sums)), mins, sums);
}

SLUICE_I8MM_TARGET float vec_dot_q4_k_i8mm(int64_t n, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4K*>(w);
  const auto* y = static_cast<const BlockQ8K*>(a);
  float acc = 0.0f, accm = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const auto* blk = reinterpret_cast<const uint8_t*>(&x[i]);
    const uint8x16_t sm = unpack_k4_scales_mins(blk + 4);
    const int16x8_t sc16 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(sm)));
    const int32x4_t sc_lo = vmovl_s16(vget_low_s16(sc16)), sc_hi = vmovl_high_s16(sc16);
    int32x4_t t = vdupq_n_s32(0);
    t = chunk_t<0>(t, x[i].qs, y[i].qs, sc_lo, sc_hi);
    t = chunk_t<1>(t, x[i].qs, y[i].qs, sc_lo, sc_hi);
    t = chunk_t<2>(t, x[i].qs, y[i].qs, sc_lo, sc_hi);
    t = chunk_t<3>(t, x[i].qs, y[i].qs, sc_lo, sc_hi);
    const int16x8_t sums = vpaddq_s16(vld1q_s16(y[i].bsums), vld1q_s16(y[i].bsums + 8));
    const int32x4_t m = mins_m(vreinterpretq_s16_u16(vmovl_high_u8(sm)), sums);
    // Both totals in one reduction: (t0+t1, t2+t3, m0+m1, m2+m3), then lanes (T, M).
    const int32x4_t halves = vpaddq_s32(t, m);
    const int32x2_t tm = vpadd_s32(vget_low_s32(halves), vget_high_s32(halves));
    const float32x2_t tmf = vcvt_f32_s32(tm);
    const float32x2_t dd = vmul_n_f32(block_d_dmin(blk), y[i].d);  // y.d * d, y.d * dmin
    acc = std::fma(vget_lane_f32(dd, 0), vget_lane_f32(tmf, 0), acc);
    accm = std::fma(vget_lane_f32(dd, 1), vget_lane_f32(tmf, 1), accm);
  }
  return acc - accm;
}

SLUICE_I8MM_TARGET void prepare_tile_q4_k_i8mm(int64_t n, const void* const* act, int n_act, void* prepared) {
  auto* out = static_cast<uint8_t*>(prepared);
  const int n_pairs = (n_act + 1) / 2;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    uint8_t* blk = out + i * static_cast<int64_t>(kTilePreparedBlockBytes);
    float d[kTileCols] = {};
    int16_t sums[kTileCols][8] = {};
    for (int p = 0; p < n_pairs; ++p) {
      const BlockQ8K& y0 = static_cast<const BlockQ8K*>(act[2 * p])[i];
      const BlockQ8K* y1 = 2 * p + 1 < n_act ? &static_cast<const BlockQ8K*>(act[2 * p + 1])[i] : nullptr;
      uint8_t* dst = blk + p * kPairBytes;
      for (int k = 0; k < kQK_K; k += 16) {
        const int64x2_t a = vreinterpretq_s64_s8(vld1q_s8(y0.qs + k));
        const int64x2_t b = y1 ? vreinterpretq_s64_s8(vld1q_s8(y1->qs + k)) : vdupq_n_s64(0);
        vst1q_s64(reinterpret_cast<int64_t*>(dst + 2 * k), vzip1q_s64(a, b));
        vst1q_s64(reinterpret_cast<int64_t*>(dst + 2 * k + 16), vzip2q_s64(a, b));
      }
      for (int j = 0; j < 2; ++j) {
        const BlockQ8K* y = j == 0 ? &y0 : y1;
        if (!y) continue;
        d[2 * p + j] = y->d;
        vst1q_s16(sums[2 * p + j], vpaddq_s16(vld1q_s16(y->bsums), vld1q_s16(y->bsums + 8)));
      }
    }
    std::memcpy(blk + kDOffset, d, sizeof d);
    std::memcpy(blk + kSumsOffset, sums, sizeof sums);
  }
}

// Position pairs one pass over a row pair's blocks handles: their T, acc and
// accm vectors and the eight decoded weight operands fit the 32 registers.
constexpr int kPairsPerPass = 4;

// Rows r0 and r1 (r1 == r0 for a lone last row) against position pairs
// [p0, p0 + NP); writes only rows < n_rows and positions < n_act.
template <int NP>
SLUICE_I8MM_TARGET void row_pair(const TileGemmCall& c, int r0, int p0) {
  const int r1 = r0 + 1 < c.n_rows ? r0 + 1 : r0;
  const auto* w0 = reinterpret_cast<const BlockQ4K*>(c.w + static_cast<size_t>(r0) * c.row_bytes);
  const auto* w1 = reinterpret_cast<const BlockQ4K*>(c.w + static_cast<size_t>(r1) * c.row_bytes);
  const auto* prep = static_cast<const uint8_t*>(c.prepared);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  float32x4_t acc[NP], accm[NP];
  for (int p = 0; p < NP; ++p) acc[p] = accm[p] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < c.n / kQK_K; ++i) {
    const uint8_t* blk = prep + i * static_cast<int64_t>(kTilePreparedBlockBytes);
    const uint8x16_t sm0 = unpack_k4_scales_mins(reinterpret_cast<const uint8_t*>(&w0[i]) + 4);
    const uint8x16_t sm1 = unpack_k4_scales_mins(reinterpret_cast<const uint8_t*>(&w1[i]) + 4);
    uint8_t sc0[16], sc1[16];
    vst1q_u8(sc0, sm0);
    vst1q_u8(sc1, sm1);
    int32x4_t t[NP];
    for (int p = 0; p < NP; ++p) t[p] = vdupq_n_s32(0);
#pragma GCC unroll 4
    for (int ch = 0; ch < 4; ++ch) {
      const uint8x16x2_t a = vld1q_u8_x2(w0[i].qs + 32 * ch);
      const uint8x16x2_t b = vld1q_u8_x2(w1[i].qs + 32 * ch);
      // Runs 2ch (low nibbles) and 2ch+1 (high): four 2x8 operands each,
      // row r0's eight quants then row r1's.
      int8x16_t lo[4], hi[4];
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        const uint64x2_t la = vreinterpretq_u64_u8(vandq_u8(a.val[v], m4));
        const uint64x2_t lb = vreinterpretq_u64_u8(vandq_u8(b.val[v], m4));
        const uint64x2_t ha = vreinterpretq_u64_u8(vshrq_n_u8(a.val[v], 4));
        const uint64x2_t hb = vreinterpretq_u64_u8(vshrq_n_u8(b.val[v], 4));
        lo[2 * v] = vreinterpretq_s8_u64(vzip1q_u64(la, lb));
        lo[2 * v + 1] = vreinterpretq_s8_u64(vzip2q_u64(la, lb));
        hi[2 * v] = vreinterpretq_s8_u64(vzip1q_u64(ha, hb));
        hi[2 * v + 1] = vreinterpretq_s8_u64(vzip2q_u64(ha, hb));
      }
      // Per-run scales as the 2x2 result is laid out: (r0,p) (r0,p+1) (r1,p) (r1,p+1).
      const int32x4_t sc_lo = vcombine_s32(vdup_n_s32(sc0[2 * ch]), vdup_n_s32(sc1[2 * ch]));
      const int32x4_t sc_hi = vcombine_s32(vdup_n_s32(sc0[2 * ch + 1]), vdup_n_s32(sc1[2 * ch + 1]));
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const int8_t* y = reinterpret_cast<const int8_t*>(blk + (p0 + p) * kPairBytes);
        const int8x16x4_t ylo = vld1q_s8_x4(y + 2 * 64 * ch);
        const int8x16x4_t yhi = vld1q_s8_x4(y + 2 * 64 * ch + 64);
        int32x4_t dl = vmmlaq_s32(vdupq_n_s32(0), lo[0], ylo.val[0]);
        dl = vmmlaq_s32(dl, lo[1], ylo.val[1]);
        dl = vmmlaq_s32(dl, lo[2], ylo.val[2]);
        dl = vmmlaq_s32(dl, lo[3], ylo.val[3]);
        int32x4_t dh = vmmlaq_s32(vdupq_n_s32(0), hi[0], yhi.val[0]);
        dh = vmmlaq_s32(dh, hi[1], yhi.val[1]);
        dh = vmmlaq_s32(dh, hi[2], yhi.val[2]);
        dh = vmmlaq_s32(dh, hi[3], yhi.val[3]);
        t[p] = vmlaq_s32(vmlaq_s32(t[p], dl, sc_lo), dh, sc_hi);
      }
    }
    const int16x8_t mins0 = vreinterpretq_s16_u16(vmovl_high_u8(sm0));
    const int16x8_t mins1 = vreinterpretq_s16_u16(vmovl_high_u8(sm1));
    const float32x2_t dw0 = block_d_dmin(reinterpret_cast<const uint8_t*>(&w0[i]));
    const float32x2_t dw1 = block_d_dmin(reinterpret_cast<const uint8_t*>(&w1[i]));
    const float32x4_t d_rows = vcombine_f32(vdup_lane_f32(dw0, 0), vdup_lane_f32(dw1, 0));
    const float32x4_t dmin_rows = vcombine_f32(vdup_lane_f32(dw0, 1), vdup_lane_f32(dw1, 1));
    const auto* yd = reinterpret_cast<const float*>(blk + kDOffset);
    const auto* ys = reinterpret_cast<const int16_t*>(blk + kSumsOffset);
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const int q = 2 * (p0 + p);
      const int16x8_t s0 = vld1q_s16(ys + 8 * q), s1 = vld1q_s16(ys + 8 * (q + 1));
      // M for (r0,q) (r0,q+1) (r1,q) (r1,q+1): four 8-term dots, summed pairwise.
      const int32x4_t m = vpaddq_s32(vpaddq_s32(mins_m(mins0, s0), mins_m(mins0, s1)),
                                     vpaddq_s32(mins_m(mins1, s0), mins_m(mins1, s1)));
      const float32x2_t ydp = vld1_f32(yd + q);
      const float32x4_t ydv = vcombine_f32(ydp, ydp);
      // y.d * d and y.d * dmin rounded first, as vec_dot's scalar steps are.
      acc[p] = vfmaq_f32(acc[p], vmulq_f32(ydv, d_rows), vcvtq_f32_s32(t[p]));
      accm[p] = vfmaq_f32(accm[p], vmulq_f32(ydv, dmin_rows), vcvtq_f32_s32(m));
    }
  }
  for (int p = 0; p < NP; ++p) {
    float r[4];
    vst1q_f32(r, vsubq_f32(acc[p], accm[p]));
    const int q = 2 * (p0 + p);
    for (int k = 0; k < 4; ++k) {
      const int row = k < 2 ? r0 : r0 + 1, pos = q + (k & 1);
      if (row < c.n_rows && pos < c.n_act) c.out[pos * c.out_stride + row] = r[k];
    }
  }
}

SLUICE_I8MM_TARGET void gemm_tile_q4_k_i8mm(const TileGemmCall& c) {
  const int n_pairs = (c.n_act + 1) / 2;
  for (int r = 0; r < c.n_rows; r += 2) {
    int p = 0;
    for (; p + kPairsPerPass <= n_pairs; p += kPairsPerPass) row_pair<kPairsPerPass>(c, r, p);
    switch (n_pairs - p) {
      case 3: row_pair<3>(c, r, p); break;
      case 2: row_pair<2>(c, r, p); break;
      case 1: row_pair<1>(c, r, p); break;
      default: break;
    }
  }
}

#undef SLUICE_I8MM_TARGET

}  // namespace

void fill_i8mm_q4k(KernelTable& table) {
  TypeKernels& k = table[static_cast<uint32_t>(GgmlType::Q4_K)];
  k.vec_dot = vec_dot_q4_k_i8mm;
  k.vec_dot_type = GgmlType::Q8_K;
  k.prepare_tile = prepare_tile_q4_k_i8mm;
  k.gemm_tile = gemm_tile_q4_k_i8mm;
}

}  // namespace sluice::kernels

#endif  // __aarch64__
