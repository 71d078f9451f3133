// Included by arm/legacy_neon.cpp once per instruction set (plain Advanced
// SIMD, and armv8.2-a dot product), inside a namespace of its own, with
//   SLUICE_NEON_TARGET      the function target attribute of that set (or nothing),
//   lanes8(w0, w1, a0, a1)  the eight exact int32 sums of four consecutive int8
//                           products (elements 4k..4k+3) of a 32-element block.
//
// The symmetric formats (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4: x = d * q, Q8_0
// activations) accumulate in the float order of the x86 kernels
// (x86/legacy_x86_dot_body.h): per block the eight lane sums are converted to
// float and fused-multiply-added with d_w * d_a into one of two 8-lane
// accumulators (even blocks, odd blocks); at the end the accumulators are
// added and reduced as x86's hsum does, ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
// The integer sums are exact on both, so these kernels give the AVX2 (and
// AVX-VNNI) results bit for bit: the same model has the same logits on an x86
// and an ARM machine. tests/unit/kernels_legacy_test.cpp checks the order.

// One block's eight lane sums (weight levels w0, w1 against the 32
// activation quants at qs), as float, fused into acc (k = 0..3, k = 4..7)
// with the block's scale product s. Every dot below accumulates through it.
SLUICE_NEON_TARGET inline void fma_lanes(int8x16_t w0, int8x16_t w1, const int8_t* qs, float s, float32x4_t* acc) {
  int32x4_t l, h;
  lanes8(w0, w1, vld1q_s8(qs), vld1q_s8(qs + 16), l, h);
  acc[0] = vfmaq_n_f32(acc[0], vcvtq_f32_s32(l), s);
  acc[1] = vfmaq_n_f32(acc[1], vcvtq_f32_s32(h), s);
}

// x86's final reduction of acc0 + acc1 (see above).
SLUICE_NEON_TARGET inline float reduce8(float32x4_t acc0_lo, float32x4_t acc0_hi, float32x4_t acc1_lo,
                                        float32x4_t acc1_hi) {
  const float32x4_t s = vaddq_f32(vaddq_f32(acc0_lo, acc1_lo), vaddq_f32(acc0_hi, acc1_hi));
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
}

// Block b's lanes fused into acc with d_w * d_a (A: BlockQ8_0 or BlockQ8_1,
// whose quants and scale d are laid out alike).
template <class W, class A>
SLUICE_NEON_TARGET inline void fma_block(const typename W::Block& b, const A& a, float32x4_t* acc) {
  int8x16_t w0, w1;
  W::levels(b, w0, w1);
  fma_lanes(w0, w1, a.qs, W::scale(b) * half_to_float(a.d), acc);
}

// Even blocks into acc0, odd ones into acc1, two at a time so both stay in
// registers.
template <class W>
SLUICE_NEON_TARGET float vec_dot_symmetric(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename W::Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float32x4_t acc0[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, acc1[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  const int64_t nb = n / kLegacyBlock;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    fma_block<W>(x[i], y[i], acc0);
    fma_block<W>(x[i + 1], y[i + 1], acc1);
  }
  if (i < nb) fma_block<W>(x[i], y[i], acc0);
  return reduce8(acc0[0], acc0[1], acc1[0], acc1[1]);
}

// One weight row against n_act <= kMaxDotCols activation rows: each weight
// block is decoded once; column j accumulates exactly as vec_dot_symmetric.
template <class W>
SLUICE_NEON_TARGET void vec_dot_cols_symmetric(int64_t n, const void* w, const void* const* act, int n_act,
                                               float* out) {
  const auto* x = static_cast<const typename W::Block*>(w);
  float32x4_t acc[kMaxDotCols][2][2];
  for (int j = 0; j < n_act; ++j)
    for (auto& parity : acc[j])
      for (float32x4_t& v : parity) v = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    int8x16_t w0, w1;
    W::levels(x[i], w0, w1);
    const float d = W::scale(x[i]);
    for (int j = 0; j < n_act; ++j) {
      const BlockQ8_0& a = static_cast<const BlockQ8_0*>(act[j])[i];
      fma_lanes(w0, w1, a.qs, d * half_to_float(a.d), acc[j][i & 1]);
    }
  }
  for (int j = 0; j < n_act; ++j) out[j] = reduce8(acc[j][0][0], acc[j][0][1], acc[j][1][0], acc[j][1][1]);
}

// Offset formats (Q4_1, Q5_1; x = d q + m) with Q8_1 activations (s = d_a
// sum q_a): the d d_a sum(q q_a) part as vec_dot_symmetric, and sum m s as
// x86's dot_offset adds it: per pair of blocks, the pair's sum into a running
// float, added after the reduction (each m s is exact: two fp16 values).
template <class W>
SLUICE_NEON_TARGET float vec_dot_offset(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename W::Block*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(act);
  float32x4_t acc0[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, acc1[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  float offsets = 0.0f;
  const int64_t nb = n / kLegacyBlock;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    fma_block<W>(x[i], y[i], acc0);
    fma_block<W>(x[i + 1], y[i + 1], acc1);
    offsets += W::offset(x[i]) * half_to_float(y[i].s) + W::offset(x[i + 1]) * half_to_float(y[i + 1].s);
  }
  if (i < nb) {
    fma_block<W>(x[i], y[i], acc0);
    offsets += W::offset(x[i]) * half_to_float(y[i].s);
  }
  return reduce8(acc0[0], acc0[1], acc1[0], acc1[1]) + offsets;
}

// One weight row against n_act <= kMaxDotCols activation rows; column j
// accumulates exactly as vec_dot_offset.
template <class W>
SLUICE_NEON_TARGET void vec_dot_cols_offset(int64_t n, const void* w, const void* const* act, int n_act, float* out) {
  const auto* x = static_cast<const typename W::Block*>(w);
  float32x4_t acc[kMaxDotCols][2][2];
  float offsets[kMaxDotCols], pair[kMaxDotCols];
  for (int j = 0; j < n_act; ++j) {
    for (auto& parity : acc[j])
      for (float32x4_t& v : parity) v = vdupq_n_f32(0.0f);
    offsets[j] = pair[j] = 0.0f;
  }
  const int64_t nb = n / kLegacyBlock;
  for (int64_t i = 0; i < nb; ++i) {
    int8x16_t w0, w1;
    W::levels(x[i], w0, w1);
    const float d = W::scale(x[i]), m = W::offset(x[i]);
    for (int j = 0; j < n_act; ++j) {
      const BlockQ8_1& a = static_cast<const BlockQ8_1*>(act[j])[i];
      fma_lanes(w0, w1, a.qs, d * half_to_float(a.d), acc[j][i & 1]);
      const float ms = m * half_to_float(a.s);
      if ((i & 1) == 0 && i + 1 < nb) {
        pair[j] = ms;  // the pair's first term; its sum is added with the second
      } else if (i & 1) {
        offsets[j] += pair[j] + ms;
      } else {
        offsets[j] += ms;  // a last odd block
      }
    }
  }
  for (int j = 0; j < n_act; ++j)
    out[j] = reduce8(acc[j][0][0], acc[j][0][1], acc[j][1][0], acc[j][1][1]) + offsets[j];
}

inline void fill(KernelTable& table) {
  auto set = [&](GgmlType t, VecDotFn dot, VecDotColsFn cols) {
    table[static_cast<uint32_t>(t)].vec_dot = dot;
    table[static_cast<uint32_t>(t)].vec_dot_cols = cols;
    table[static_cast<uint32_t>(t)].vec_dot_type = GgmlType::Q8_0;
  };
  set(GgmlType::Q4_0, &vec_dot_symmetric<Q4_0Levels>, &vec_dot_cols_symmetric<Q4_0Levels>);
  set(GgmlType::Q5_0, &vec_dot_symmetric<Q5_0Levels>, &vec_dot_cols_symmetric<Q5_0Levels>);
  set(GgmlType::Q8_0, &vec_dot_symmetric<Q8_0Levels>, &vec_dot_cols_symmetric<Q8_0Levels>);
  set(GgmlType::IQ4_NL, &vec_dot_symmetric<Iq4NlLevels>, &vec_dot_cols_symmetric<Iq4NlLevels>);
  set(GgmlType::MXFP4, &vec_dot_symmetric<Mxfp4Levels>, &vec_dot_cols_symmetric<Mxfp4Levels>);
  for (auto [t, dot, cols] : {std::tuple<GgmlType, VecDotFn, VecDotColsFn>{GgmlType::Q4_1, &vec_dot_offset<Q4_1Levels>,
                                                                           &vec_dot_cols_offset<Q4_1Levels>},
                              {GgmlType::Q5_1, &vec_dot_offset<Q5_1Levels>, &vec_dot_cols_offset<Q5_1Levels>}}) {
    table[static_cast<uint32_t>(t)].vec_dot = dot;
    table[static_cast<uint32_t>(t)].vec_dot_cols = cols;
    table[static_cast<uint32_t>(t)].vec_dot_type = GgmlType::Q8_1;
  }
}
