// The block loops of the NEON Q4_K, Q5_K and Q6_K dot products (one weight
// row against 1..kNeonCols Q8_K activation rows; vec_dot is the one-column
// case, so vec_dot_cols gives its bits) and the helpers every NEON K-quant
// dot shares, compiled once per NEON build (Q2_K, Q3_K and IQ4_XS:
// arm/kquant_neon_q23_body.h; the entries and the fill: arm/kquant_neon_fill_body.h).
//
// They follow the x86 kernels (x86/kquant_x86_dot_body.h) step for step on
// the float side, so a model gives the same logits on ARM and x86: per
// super-block eight int32 lanes
//   sumi[m] = sum over 32-byte runs r of scale_r * (sum of the products at
//             run positions 4m..4m+3)
// (for Q6_K minus x86's offset lanes), converted to float and
// fused-multiply-added with d = y.d * d_w into an 8-lane accumulator; Q4_K and
// Q5_K also fuse their mins, as x86's four madd lanes, into a 4-lane
// accumulator with dmin = y.d * dmin_w; at the end x86's reductions. The
// integer sums are exact on both, so the grouping of the integer work is free.
// tests/unit/kernels_kquant_order_test.cpp checks the order bit for bit.
//
// Not a normal header: included (on purpose without an include guard) by
// arm/kquant_neon.cpp inside the namespace of each build, after it defined
//   SLUICE_NEON_TARGET        the function target attribute of the build (or nothing),
//   Scales                    eight sub-block scales as that build wants them,
//   make_scales(int16x8_t)    -> Scales,
//   run_acc<kLo, kHi>(acc, q0, q1, y0, y1, s)
//                             acc.lo[m] += s[kLo] * (sum of q0 * y0 at 4m..4m+3),
//                             acc.hi[m] += s[kHi] * (sum of q1 * y1 at 4m..4m+3),
//                             for weights q in 0..63 and activations y in -128..127,
//   sums4_wide(q, y)          lane m = sum of q * y at 4m..4m+3, exact in int32 for
//                             weights in -127..127 and activations in -128..127.

// x86's final 8-lane reduction (avx2::hsum): ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
SLUICE_NEON_TARGET inline float hsum8(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  return vpadds_f32(vadd_f32(vget_low_f32(s), vget_high_f32(s)));
}

// x86's reduction of the 4-lane min accumulator: (m0+m2) + (m1+m3).
SLUICE_NEON_TARGET inline float hsum4(float32x4_t v) {
  return vpadds_f32(vadd_f32(vget_low_f32(v), vget_high_f32(v)));
}

// block_d_dmin and unpack_k4_scales_mins: arm/k4_neon.h.

struct Acc8 {  // eight int32 lanes
  int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
};

// Columns one call of the kernels below handles at most. Q6_K takes four
// (its float side is two accumulators per column); Q4_K and Q5_K take two:
// with four, their per-column lanes, accumulators and scale pairs no longer
// fit the 32 registers beside the decoded quants, and the spills cost more
// than re-decoding (bench/neon_icount.sh: 184 against 140 instructions per
// block and column in the plain build).
inline constexpr int kNeonCols = 4;
inline constexpr int kK4Cols = 2;

// Q4_K / Q5_K: the 64 quants of chunk c (32 bytes of qs: elements 64c..64c+31
// in the low nibbles, 64c+32..64c+63 in the high ones; Q5_K's fifth bits are
// bits 2c and 2c+1 of qh), decoded once, against the activations of each of
// the N columns, into that column's lanes.
template <bool kFiveBit, int c, int N>
SLUICE_NEON_TARGET inline void k4_chunk(const uint8_t* qs, uint8x16x2_t qh, const int8_t* const* y, const Scales& s,
                                        Acc8* acc) {
  const uint8x16x2_t bits = vld1q_u8_x2(qs + 32 * c);
  uint8x16_t lo0, lo1, hi0, hi1;
  if constexpr (kFiveBit) {
    // Low nibble | bit 2c of qh at bit 4 (shift-left-insert keeps the nibble);
    // high nibble | bit 2c+1 of qh at bit 4 (shift-right-insert keeps bits 4-7).
    const uint8x16_t one = vdupq_n_u8(1), bit4 = vdupq_n_u8(0x10);
    if constexpr (c == 0) {
      lo0 = vsliq_n_u8(bits.val[0], vandq_u8(qh.val[0], one), 4);
      lo1 = vsliq_n_u8(bits.val[1], vandq_u8(qh.val[1], one), 4);
    } else {
      lo0 = vsliq_n_u8(bits.val[0], vandq_u8(vshrq_n_u8(qh.val[0], 2 * c), one), 4);
      lo1 = vsliq_n_u8(bits.val[1], vandq_u8(vshrq_n_u8(qh.val[1], 2 * c), one), 4);
    }
    if constexpr (c < 2) {
      hi0 = vsriq_n_u8(vandq_u8(vshlq_n_u8(qh.val[0], 3 - 2 * c), bit4), bits.val[0], 4);
      hi1 = vsriq_n_u8(vandq_u8(vshlq_n_u8(qh.val[1], 3 - 2 * c), bit4), bits.val[1], 4);
    } else {
      hi0 = vsriq_n_u8(vandq_u8(vshrq_n_u8(qh.val[0], 2 * c - 3), bit4), bits.val[0], 4);
      hi1 = vsriq_n_u8(vandq_u8(vshrq_n_u8(qh.val[1], 2 * c - 3), bit4), bits.val[1], 4);
    }
  } else {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    lo0 = vandq_u8(bits.val[0], m4);
    lo1 = vandq_u8(bits.val[1], m4);
    hi0 = vshrq_n_u8(bits.val[0], 4);
    hi1 = vshrq_n_u8(bits.val[1], 4);
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const int8x16x4_t a = vld1q_s8_x4(y[j] + 64 * c);
    run_acc<2 * c, 2 * c>(acc[j], vreinterpretq_s8_u8(lo0), vreinterpretq_s8_u8(lo1), a.val[0], a.val[1], s);
    run_acc<2 * c + 1, 2 * c + 1>(acc[j], vreinterpretq_s8_u8(hi0), vreinterpretq_s8_u8(hi1), a.val[2], a.val[3],
                                  s);
  }
}

// Q4_K (kFiveBit = false) and Q5_K, one weight row against N activation rows;
// column j gets exactly the steps of a one-column call. Blocks are addressed
// as bytes: the two structs share the d, dmin, scales prefix; Q5_K has qh[32]
// before qs.
template <bool kFiveBit, int N>
SLUICE_NEON_TARGET void k4_cols(int64_t n, const void* w, const void* const* act, float* out) {
  constexpr size_t kBlockBytes = kFiveBit ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
  const auto* first = static_cast<const uint8_t*>(w);
  float32x4_t acc_lo[N], acc_hi[N], acc_min[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) acc_lo[j] = acc_hi[j] = acc_min[j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const uint8_t* blk = first + i * static_cast<int64_t>(kBlockBytes);
    const uint8x16_t scales_mins = unpack_k4_scales_mins(blk + 4);
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_high_u8(scales_mins));
    const float32x2_t dw = block_d_dmin(blk);
    float32x2_t d_dmin[N];  // y.d * d, y.d * dmin, as x86's y.d * blk.d
    const int8_t* yq[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const BlockQ8K& y = static_cast<const BlockQ8K*>(act[j])[i];
      yq[j] = y.qs;
      d_dmin[j] = vmul_n_f32(dw, y.d);
      // Mins: x86's madd lanes k = m[2k] * t[2k] + m[2k+1] * t[2k+1], where
      // t[j] = bsums[2j] + bsums[2j+1] (the sum of sub-block j's activations).
      const int16x8_t sub_sums = vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
      const int32x4_t min_lanes =
          vpaddq_s32(vmull_s16(vget_low_s16(mins), vget_low_s16(sub_sums)), vmull_high_s16(mins, sub_sums));
      acc_min[j] = vfmaq_lane_f32(acc_min[j], vcvtq_f32_s32(min_lanes), d_dmin[j], 1);
    }

    const Scales s = make_scales(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(scales_mins))));
    const uint8_t* qs = blk + 4 + kKScaleBytes + (kFiveBit ? kQK_K / 8 : 0);
    uint8x16x2_t qh{};
    if constexpr (kFiveBit) qh = vld1q_u8_x2(blk + 4 + kKScaleBytes);
    Acc8 sumi[N];
    k4_chunk<kFiveBit, 0, N>(qs, qh, yq, s, sumi);
    k4_chunk<kFiveBit, 1, N>(qs, qh, yq, s, sumi);
    k4_chunk<kFiveBit, 2, N>(qs, qh, yq, s, sumi);
    k4_chunk<kFiveBit, 3, N>(qs, qh, yq, s, sumi);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      acc_lo[j] = vfmaq_lane_f32(acc_lo[j], vcvtq_f32_s32(sumi[j].lo), d_dmin[j], 0);
      acc_hi[j] = vfmaq_lane_f32(acc_hi[j], vcvtq_f32_s32(sumi[j].hi), d_dmin[j], 0);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) out[j] = hsum8(acc_lo[j], acc_hi[j]) - hsum4(acc_min[j]);
}

// Q6_K: one 128-element half (ql 64 bytes, qh 32 bytes; quants 32k..32k+31
// are run k, whose first 16 take the half's scale 2k and last 16 scale 2k+1),
// decoded once, against each column's activations, into its lanes. Quants
// stay unsigned (0..63, meaning q - 32); the caller takes x86's offset lanes
// out.
template <int half, int N>
SLUICE_NEON_TARGET inline void q6_half(const BlockQ6K& b, const int8_t* const* y, const Scales& s, Acc8* acc) {
  const uint8x16x2_t ql0 = vld1q_u8_x2(b.ql + 64 * half);
  const uint8x16x2_t ql1 = vld1q_u8_x2(b.ql + 64 * half + 32);
  const uint8x16x2_t qh = vld1q_u8_x2(b.qh + 32 * half);
  const uint8x16_t m3 = vdupq_n_u8(0x03), m30 = vdupq_n_u8(0x30);
  int8x16_t q[4][2];
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    // Run 0: low nibbles of ql[0..31] | qh bits 0-1 at bits 4-5.
    q[0][v] = vreinterpretq_s8_u8(vsliq_n_u8(ql0.val[v], vandq_u8(qh.val[v], m3), 4));
    // Run 1: low nibbles of ql[32..63] | qh bits 2-3.
    q[1][v] = vreinterpretq_s8_u8(vsliq_n_u8(ql1.val[v], vandq_u8(vshrq_n_u8(qh.val[v], 2), m3), 4));
    // Run 2: high nibbles of ql[0..31] | qh bits 4-5 (already in place).
    q[2][v] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(qh.val[v], m30), ql0.val[v], 4));
    // Run 3: high nibbles of ql[32..63] | qh bits 6-7.
    q[3][v] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(vshrq_n_u8(qh.val[v], 2), m30), ql1.val[v], 4));
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const int8x16x4_t a0 = vld1q_s8_x4(y[j] + 128 * half);
    const int8x16x4_t a1 = vld1q_s8_x4(y[j] + 128 * half + 64);
    run_acc<0, 1>(acc[j], q[0][0], q[0][1], a0.val[0], a0.val[1], s);
    run_acc<2, 3>(acc[j], q[1][0], q[1][1], a0.val[2], a0.val[3], s);
    run_acc<4, 5>(acc[j], q[2][0], q[2][1], a1.val[0], a1.val[1], s);
    run_acc<6, 7>(acc[j], q[3][0], q[3][1], a1.val[2], a1.val[3], s);
  }
}

template <int N>
SLUICE_NEON_TARGET void q6_cols(int64_t n, const void* w, const void* const* act, float* out) {
  const auto* wb = static_cast<const BlockQ6K*>(w);
  float32x4_t acc_lo[N], acc_hi[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) acc_lo[j] = acc_hi[j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ6K& b = wb[i];
    uint16_t dh;
    std::memcpy(&dh, &b.d, 2);
    const float dw = half_to_float(dh);
    const int8x16_t scales8 = vld1q_s8(b.scales);
    const int16x8_t sc0 = vmovl_s8(vget_low_s8(scales8)), sc1 = vmovl_high_s8(scales8);
    const int8_t* yq[N];
    Acc8 sumi[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) yq[j] = static_cast<const BlockQ8K*>(act[j])[i].qs;
    q6_half<0, N>(b, yq, make_scales(sc0), sumi);
    q6_half<1, N>(b, yq, make_scales(sc1), sumi);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const BlockQ8K& y = static_cast<const BlockQ8K*>(act[j])[i];
      const float d = y.d * dw;
      // x86's offset lanes: m = 32 * (sc[2m] * bsums[2m] + sc[2m+1] * bsums[2m+1]).
      const int16x8_t bs0 = vld1q_s16(y.bsums), bs1 = vld1q_s16(y.bsums + 8);
      const int32x4_t off_lo =
          vpaddq_s32(vmull_s16(vget_low_s16(sc0), vget_low_s16(bs0)), vmull_high_s16(sc0, bs0));
      const int32x4_t off_hi =
          vpaddq_s32(vmull_s16(vget_low_s16(sc1), vget_low_s16(bs1)), vmull_high_s16(sc1, bs1));
      const int32x4_t lo = vsubq_s32(sumi[j].lo, vshlq_n_s32(off_lo, 5));
      const int32x4_t hi = vsubq_s32(sumi[j].hi, vshlq_n_s32(off_hi, 5));
      acc_lo[j] = vfmaq_n_f32(acc_lo[j], vcvtq_f32_s32(lo), d);
      acc_hi[j] = vfmaq_n_f32(acc_hi[j], vcvtq_f32_s32(hi), d);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) out[j] = hsum8(acc_lo[j], acc_hi[j]);
}
