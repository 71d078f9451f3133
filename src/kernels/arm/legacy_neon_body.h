// Included by arm/legacy_neon.cpp once per instruction set (plain Advanced
// SIMD, and armv8.2-a dot product), inside a namespace of its own, with
//   SLUICE_NEON_TARGET  the function target attribute of that set (or nothing),
//   dot32(w0, w1, a0, a1)  the exact int32 sum of 32 int8 products.
// The symmetric formats (Q4_0, Q8_0, IQ4_NL, MXFP4: x = d * q, Q8_0
// activations): per block the integer sum is exact and the float step is the
// scalar reference's, in block order: sum += float(sumi) * (d_w * d_a). So
// vec_dot and the multi-column dot are bit-identical to the scalar vec_dot
// (the library is built with -ffp-contract=off, so no step is fused).

template <class W>
SLUICE_NEON_TARGET float vec_dot_symmetric(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename W::Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    int8x16_t w0, w1;
    W::levels(x[i], w0, w1);
    const int32_t sumi = dot32(w0, w1, vld1q_s8(y[i].qs), vld1q_s8(y[i].qs + 16));
    sum += static_cast<float>(sumi) * (W::scale(x[i]) * fp16_to_fp32(y[i].d));
  }
  return sum;
}

// One weight row against n_act <= kMaxDotCols activation rows: each weight
// block is decoded once; column j accumulates exactly as vec_dot_symmetric.
template <class W>
SLUICE_NEON_TARGET void vec_dot_cols_symmetric(int64_t n, const void* w, const void* const* act, int n_act,
                                               float* out) {
  const auto* x = static_cast<const typename W::Block*>(w);
  float sum[kMaxDotCols] = {};
  for (int64_t i = 0; i < n / kLegacyBlock; ++i) {
    int8x16_t w0, w1;
    W::levels(x[i], w0, w1);
    const float d = W::scale(x[i]);
    for (int j = 0; j < n_act; ++j) {
      const BlockQ8_0& a = static_cast<const BlockQ8_0*>(act[j])[i];
      const int32_t sumi = dot32(w0, w1, vld1q_s8(a.qs), vld1q_s8(a.qs + 16));
      sum[j] += static_cast<float>(sumi) * (d * fp16_to_fp32(a.d));
    }
  }
  for (int j = 0; j < n_act; ++j) out[j] = sum[j];
}

inline void fill(KernelTable& table) {
  auto set = [&](GgmlType t, VecDotFn dot, VecDotColsFn cols) {
    table[static_cast<uint32_t>(t)].vec_dot = dot;
    table[static_cast<uint32_t>(t)].vec_dot_cols = cols;
    table[static_cast<uint32_t>(t)].vec_dot_type = GgmlType::Q8_0;
  };
  set(GgmlType::Q4_0, &vec_dot_symmetric<Q4_0Levels>, &vec_dot_cols_symmetric<Q4_0Levels>);
  set(GgmlType::Q8_0, &vec_dot_symmetric<Q8_0Levels>, &vec_dot_cols_symmetric<Q8_0Levels>);
  set(GgmlType::IQ4_NL, &vec_dot_symmetric<Iq4NlLevels>, &vec_dot_cols_symmetric<Iq4NlLevels>);
  set(GgmlType::MXFP4, &vec_dot_symmetric<Mxfp4Levels>, &vec_dot_cols_symmetric<Mxfp4Levels>);
}
