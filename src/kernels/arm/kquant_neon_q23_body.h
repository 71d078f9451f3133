// The block loops of the NEON Q2_K, Q3_K and IQ4_XS dot products, in x86's
// float order (x86/kquant_avx2.cpp), compiled once per NEON build. Not a
// normal header: included (without an include guard, on purpose) by
// arm/kquant_neon.cpp inside each build's namespace after
// arm/kquant_neon_body.h, whose helpers (hsum8, Acc8, the build's Scales,
// run_acc and sums4_wide) it uses.

// Q2_K and Q3_K: one 128-element half (qs bytes 32h..32h+31; run k holds
// elements 128h + 32k + l in bits 2k..2k+1 of byte l, sub-blocks 8h + 2k and
// 8h + 2k + 1), decoded once per run against each column, scales 2k / 2k + 1 of
// the half's eight. Q3_K adds bit 4h + k of hmask[l] as bit 2 (quants 0..7,
// meaning q - 4; the caller takes x86's offset lanes out).
template <bool kThreeBit, int h, int k, int N>
SLUICE_NEON_TARGET inline void q23_run(uint8x16x2_t bits, uint8x16x2_t hmask, const int8_t* const* y, const Scales& s,
                                       Acc8* acc) {
  const uint8x16_t m3 = vdupq_n_u8(3);
  uint8x16_t q0 = bits.val[0], q1 = bits.val[1];
  if constexpr (k > 0) q0 = vshrq_n_u8(q0, 2 * k), q1 = vshrq_n_u8(q1, 2 * k);
  q0 = vandq_u8(q0, m3);
  q1 = vandq_u8(q1, m3);
  if constexpr (kThreeBit) {
    // Bit 4h + k of hmask moved to bit 2.
    constexpr int b = 4 * h + k;
    uint8x16_t h0 = hmask.val[0], h1 = hmask.val[1];
    if constexpr (b > 2) {
      h0 = vshrq_n_u8(h0, b - 2), h1 = vshrq_n_u8(h1, b - 2);
    } else if constexpr (b < 2) {
      h0 = vshlq_n_u8(h0, 2 - b), h1 = vshlq_n_u8(h1, 2 - b);
    }
    const uint8x16_t four = vdupq_n_u8(4);
    q0 = vorrq_u8(q0, vandq_u8(h0, four));
    q1 = vorrq_u8(q1, vandq_u8(h1, four));
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const int8x16x2_t a = vld1q_s8_x2(y[j] + 128 * h + 32 * k);
    run_acc<2 * k, 2 * k + 1>(acc[j], vreinterpretq_s8_u8(q0), vreinterpretq_s8_u8(q1), a.val[0], a.val[1], s);
  }
}

template <bool kThreeBit, int h, int N>
SLUICE_NEON_TARGET inline void q23_half(const uint8_t* qs, uint8x16x2_t hmask, const int8_t* const* y,
                                        const Scales& s, Acc8* acc) {
  const uint8x16x2_t bits = vld1q_u8_x2(qs + 32 * h);
  q23_run<kThreeBit, h, 0, N>(bits, hmask, y, s, acc);
  q23_run<kThreeBit, h, 1, N>(bits, hmask, y, s, acc);
  q23_run<kThreeBit, h, 2, N>(bits, hmask, y, s, acc);
  q23_run<kThreeBit, h, 3, N>(bits, hmask, y, s, acc);
}

// x86's pair lanes of 16 int16 values against the 16 bsums: lane m =
// v[2m] bsums[2m] + v[2m+1] bsums[2m+1] (lanes 0-3 from v_lo, 4-7 from v_hi).
SLUICE_NEON_TARGET inline Acc8 pair_lanes(int16x8_t v_lo, int16x8_t v_hi, const int16_t* bsums) {
  const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
  return {vpaddq_s32(vmull_s16(vget_low_s16(v_lo), vget_low_s16(b0)), vmull_high_s16(v_lo, b0)),
          vpaddq_s32(vmull_s16(vget_low_s16(v_hi), vget_low_s16(b1)), vmull_high_s16(v_hi, b1))};
}

// Each column's block lanes fused into its accumulators with d = y.d * d_w, as x86's.
template <int N>
SLUICE_NEON_TARGET inline void fuse_lanes(const Acc8* sumi, const void* const* act, int64_t i, float dw,
                                          float32x4_t* acc_lo, float32x4_t* acc_hi) {
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const float d = static_cast<const BlockQ8K*>(act[j])[i].d * dw;
    acc_lo[j] = vfmaq_n_f32(acc_lo[j], vcvtq_f32_s32(sumi[j].lo), d);
    acc_hi[j] = vfmaq_n_f32(acc_hi[j], vcvtq_f32_s32(sumi[j].hi), d);
  }
}

// Q2_K: per block x86's eight lanes (scales 0..15 of the low nibbles) fused
// with d = y.d * d_w, and its eight min lanes (the high nibbles against the
// bsums) fused with dmin = y.d * dmin_w; result hsum8(acc) - hsum8(acc_min).
template <int N>
SLUICE_NEON_TARGET void q2_cols(int64_t n, const void* w, const void* const* act, float* out) {
  const auto* wb = static_cast<const BlockQ2K*>(w);
  float32x4_t acc_lo[N], acc_hi[N], min_lo[N], min_hi[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) acc_lo[j] = acc_hi[j] = min_lo[j] = min_hi[j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ2K& b = wb[i];
    const uint8x16_t packed = vld1q_u8(b.scales);
    const uint8x16_t sc = vandq_u8(packed, vdupq_n_u8(0x0f)), mn = vshrq_n_u8(packed, 4);
    const int16x8_t mn_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
    const int16x8_t mn_hi = vreinterpretq_s16_u16(vmovl_high_u8(mn));
    const float dw = half_to_float(b.d), dminw = half_to_float(b.dmin);
    const int8_t* yq[N];
    Acc8 sumi[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const BlockQ8K& y = static_cast<const BlockQ8K*>(act[j])[i];
      yq[j] = y.qs;
      const Acc8 m = pair_lanes(mn_lo, mn_hi, y.bsums);
      const float dmin = y.d * dminw;
      min_lo[j] = vfmaq_n_f32(min_lo[j], vcvtq_f32_s32(m.lo), dmin);
      min_hi[j] = vfmaq_n_f32(min_hi[j], vcvtq_f32_s32(m.hi), dmin);
    }
    const uint8x16x2_t none{};
    q23_half<false, 0, N>(b.qs, none, yq, make_scales(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(sc)))), sumi);
    q23_half<false, 1, N>(b.qs, none, yq, make_scales(vreinterpretq_s16_u16(vmovl_high_u8(sc))), sumi);
    fuse_lanes<N>(sumi, act, i, dw, acc_lo, acc_hi);
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) out[j] = hsum8(acc_lo[j], acc_hi[j]) - hsum8(min_lo[j], min_hi[j]);
}

// Q3_K's 16 packed 6-bit scales (blocks_kquant.h unpack_q3k_scales) as signed
// bytes: scales 0-3 / 4-7 the low nibbles of bytes 0-3 / 4-7, 8-11 / 12-15
// their high nibbles; bits 4-5 of scale j are bits 2 (j / 4) of byte 8 + j % 4.
SLUICE_NEON_TARGET inline int8x16_t q3k_scales(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  constexpr uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t s[4] = {(w[0] & kLow4) | ((w[2] & kLow2) << 4), (w[1] & kLow4) | (((w[2] >> 2) & kLow2) << 4),
                         ((w[0] >> 4) & kLow4) | (((w[2] >> 4) & kLow2) << 4),
                         ((w[1] >> 4) & kLow4) | (((w[2] >> 6) & kLow2) << 4)};
  return vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(s)), vdupq_n_s8(32));
}

// Q3_K: quants 0..7 (meaning q - 4) with the signed 6-bit scales; per block
// x86's eight lanes minus its offset lanes 4 (sc[2m] bsums[2m] + sc[2m+1]
// bsums[2m+1]), fused with d = y.d * d_w; result hsum8(acc).
template <int N>
SLUICE_NEON_TARGET void q3_cols(int64_t n, const void* w, const void* const* act, float* out) {
  const auto* wb = static_cast<const BlockQ3K*>(w);
  float32x4_t acc_lo[N], acc_hi[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) acc_lo[j] = acc_hi[j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ3K& b = wb[i];
    const int8x16_t sc8 = q3k_scales(b.scales);
    const int16x8_t sc_lo = vmovl_s8(vget_low_s8(sc8)), sc_hi = vmovl_high_s8(sc8);
    const float dw = half_to_float(b.d);
    const uint8x16x2_t hmask = vld1q_u8_x2(b.hmask);
    const int8_t* yq[N];
    Acc8 sumi[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) yq[j] = static_cast<const BlockQ8K*>(act[j])[i].qs;
    q23_half<true, 0, N>(b.qs, hmask, yq, make_scales(sc_lo), sumi);
    q23_half<true, 1, N>(b.qs, hmask, yq, make_scales(sc_hi), sumi);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const Acc8 off = pair_lanes(sc_lo, sc_hi, static_cast<const BlockQ8K*>(act[j])[i].bsums);
      sumi[j].lo = vsubq_s32(sumi[j].lo, vshlq_n_s32(off.lo, 2));
      sumi[j].hi = vsubq_s32(sumi[j].hi, vshlq_n_s32(off.hi, 2));
    }
    fuse_lanes<N>(sumi, act, i, dw, acc_lo, acc_hi);
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) out[j] = hsum8(acc_lo[j], acc_hi[j]);
}

// IQ4_XS: sub-block ib (32 elements: the low nibbles of qs[16 ib..], then the
// high ones) looked up in the IQ4_NL levels (-127..113); lane m gets elements
// 4m..4m+3 of each sub-block times its signed 6-bit scale, as x86's; per block
// fused with d = y.d * d_w; result hsum8(acc). The levels are signed and large,
// so the lane sums come from sums4_wide (exact in int32), not run_acc.
template <int N>
SLUICE_NEON_TARGET void iq4xs_cols(int64_t n, const void* w, const void* const* act, float* out) {
  const auto* wb = static_cast<const BlockIq4Xs*>(w);
  const int8x16_t levels = vld1q_s8(kIq4nlValues);
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  float32x4_t acc_lo[N], acc_hi[N];
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) acc_lo[j] = acc_hi[j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockIq4Xs& b = wb[i];
    const int8_t* yq[N];
    Acc8 sumi[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) yq[j] = static_cast<const BlockQ8K*>(act[j])[i].qs;
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ++ib) {
      const int32_t scale = iq4xs_scale(b, ib);
      const uint8x16_t bits = vld1q_u8(b.qs + 16 * ib);
      const int8x16_t lo = vqtbl1q_s8(levels, vandq_u8(bits, m4));
      const int8x16_t hi = vqtbl1q_s8(levels, vshrq_n_u8(bits, 4));
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        const int8x16x2_t a = vld1q_s8_x2(yq[j] + 32 * ib);
        sumi[j].lo = vmlaq_n_s32(sumi[j].lo, sums4_wide(lo, a.val[0]), scale);
        sumi[j].hi = vmlaq_n_s32(sumi[j].hi, sums4_wide(hi, a.val[1]), scale);
      }
    }
    const float dw = half_to_float(b.d);
    fuse_lanes<N>(sumi, act, i, dw, acc_lo, acc_hi);
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) out[j] = hsum8(acc_lo[j], acc_hi[j]);
}
