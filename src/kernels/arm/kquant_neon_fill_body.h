// vec_dot and vec_dot_cols entries of every NEON K-quant dot, and the
// table fill, compiled once per NEON build. Not a normal header: included
// (without an include guard, on purpose) by arm/kquant_neon.cpp inside each
// build's namespace after arm/kquant_neon_body.h and
// arm/kquant_neon_q23_body.h.

// vec_dot: the one-column case, so it and vec_dot_cols give the same bits.
template <void (*kCols)(int64_t, const void*, const void* const*, float*)>
SLUICE_NEON_TARGET float dot_one(int64_t n, const void* w, const void* act) {
  float out;
  kCols(n, w, &act, &out);
  return out;
}

// vec_dot_cols: n_act (1..kMaxDotCols) columns in groups of at most kGroup
// (<= kNeonCols).
template <template <int> class K, int kGroup>
SLUICE_NEON_TARGET void dot_cols(int64_t n, const void* w, const void* const* act, int n_act, float* out) {
  for (; n_act > kGroup; n_act -= kGroup, act += kGroup, out += kGroup) K<kGroup>::run(n, w, act, out);
  switch (n_act) {
    case 1: K<1>::run(n, w, act, out); break;
    case 2: K<2>::run(n, w, act, out); break;
    case 3: if constexpr (kGroup >= 3) K<3>::run(n, w, act, out); break;
    case 4: if constexpr (kGroup >= 4) K<4>::run(n, w, act, out); break;
    default: break;
  }
}
template <int N>
struct Q4KCols {
  SLUICE_NEON_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    k4_cols<false, N>(n, w, act, out);
  }
};
template <int N>
struct Q5KCols {
  SLUICE_NEON_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    k4_cols<true, N>(n, w, act, out);
  }
};
template <int N>
struct Q2KCols {
  SLUICE_NEON_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    q2_cols<N>(n, w, act, out);
  }
};
template <int N>
struct Q3KCols {
  SLUICE_NEON_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    q3_cols<N>(n, w, act, out);
  }
};
template <int N>
struct Iq4XsCols {
  SLUICE_NEON_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    iq4xs_cols<N>(n, w, act, out);
  }
};
template <int N>
struct Q6KCols {
  SLUICE_NEON_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    q6_cols<N>(n, w, act, out);
  }
};

inline void fill(KernelTable& table) {
  auto set = [&](GgmlType t, VecDotFn dot, VecDotColsFn cols) {
    table[static_cast<uint32_t>(t)].vec_dot = dot;
    table[static_cast<uint32_t>(t)].vec_dot_cols = cols;
    table[static_cast<uint32_t>(t)].vec_dot_type = GgmlType::Q8_K;
  };
  set(GgmlType::Q4_K, &dot_one<&k4_cols<false, 1>>, &dot_cols<Q4KCols, kK4Cols>);
  set(GgmlType::Q5_K, &dot_one<&k4_cols<true, 1>>, &dot_cols<Q5KCols, kK4Cols>);
  set(GgmlType::Q6_K, &dot_one<&q6_cols<1>>, &dot_cols<Q6KCols, kNeonCols>);
  set(GgmlType::Q2_K, &dot_one<&q2_cols<1>>, &dot_cols<Q2KCols, kK4Cols>);
  set(GgmlType::Q3_K, &dot_one<&q3_cols<1>>, &dot_cols<Q3KCols, kK4Cols>);
  set(GgmlType::IQ4_XS, &dot_one<&iq4xs_cols<1>>, &dot_cols<Iq4XsCols, kK4Cols>);
}
