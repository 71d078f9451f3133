// The block loops of the 256-bit multi-column dot products (one weight row
// against up to kYmmCols activation rows), shared by the AVX2 and AVX-VNNI
// kernels so both accumulate in exactly the same order. Each mirrors the
// single-column loop of its format (legacy_x86_dot_body.h,
// kquant_x86_dot_body.h) operation for operation on the float side: same
// per-block scale products, same FMA chain per accumulator, same final
// reduction. Integer partial sums are exact, so how they are grouped does not
// matter. The weight block is decoded once and reused for every column; each
// column keeps its own accumulators.
//
// Not a normal header: included (on purpose without an include guard) inside
// a namespace of each ISA's kernels, after that file has defined
//   SLUICE_DOT_COLS_TARGET  the function target attribute of the ISA,
//   dot_u8_i8(u, y)         eight int32 lanes, each the sum of four u8 x s8 products,
//   madd_acc(acc, s, p)     acc + madd_epi16(s, p) as eight int32 lanes,
// and made kq_x86 (kquant_x86_common.h) and the avx2:: helpers and level types
// visible. The includer #undefs SLUICE_DOT_COLS_TARGET afterwards.
//
// Every per-column loop is fully unrolled (#pragma GCC unroll): the per-column
// accumulators are arrays, which stay in registers only when every index is a
// constant.

// Columns one call of these kernels handles at most: 4 columns of K-quant
// accumulators fill the 16 ymm registers.
inline constexpr int kYmmCols = 4;

// Calls Kernel::template run<N>(n, w, act, out) for the n_act (1..kMaxDotCols)
// columns, in groups of at most kYmmCols.
template <class Kernel>
SLUICE_DOT_COLS_TARGET void dispatch_cols(int64_t n, const void* w, const void* const* act, int n_act,
                                          float* out) {
  for (; n_act > kYmmCols; n_act -= kYmmCols, act += kYmmCols, out += kYmmCols)
    Kernel::template run<kYmmCols>(n, w, act, out);
  switch (n_act) {
    case 1: Kernel::template run<1>(n, w, act, out); break;
    case 2: Kernel::template run<2>(n, w, act, out); break;
    case 3: Kernel::template run<3>(n, w, act, out); break;
    case 4: Kernel::template run<4>(n, w, act, out); break;
    default: break;
  }
}

// ---- Symmetric legacy formats with Q8_0 activations (mirrors dot_symmetric) ----

template <class W>
struct SymmetricCols {
  // One weight block (block index i + di of every column): |levels| once; the
  // weight's signs are moved onto each column (the dot_i8 sign-transfer trick,
  // split so the weight half is shared).
  template <int N>
  SLUICE_DOT_COLS_TARGET static void block(const typename W::Block& xb, const BlockQ8_0* const* y, int64_t i,
                                           __m256* acc, int64_t di = 0) {
    const __m256i lv = W::levels(xb);
    const __m256i ax = _mm256_sign_epi8(lv, lv);
    const float s = W::scale(xb);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const BlockQ8_0& yb = y[j][i + di];
      const __m256i sy = _mm256_sign_epi8(kq_x86::load256(yb.qs), lv);
      const __m256 p = _mm256_cvtepi32_ps(dot_u8_i8(ax, sy));
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(s * avx2::fp16_scalar(yb.d)), p, acc[j]);
    }
  }

  template <int N>
  SLUICE_DOT_COLS_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    const auto* x = static_cast<const typename W::Block*>(w);
    const BlockQ8_0* y[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8_0*>(act[j]);
    const int64_t nb = n / kLegacyBlock;
    __m256 acc0[N], acc1[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
      block<N>(x[i], y, i, acc0);
      block<N>(x[i + 1], y, i, acc1, 1);
    }
    if (i < nb) block<N>(x[i], y, i, acc0);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) out[j] = avx2::hsum(_mm256_add_ps(acc0[j], acc1[j]));
  }
};

// ---- K-quants with Q8_K activations ----

// Q4_K (kFiveBit = false) and Q5_K: mirrors dot_k4_style.
template <bool kFiveBit>
struct K4StyleCols {
  template <int N>
  SLUICE_DOT_COLS_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    const auto* first = static_cast<const uint8_t*>(w);
    const size_t block_bytes = kFiveBit ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
    const BlockQ8K* y[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i one = _mm256_set1_epi8(1);
    __m256 acc[N];
    __m128 acc_min[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      acc[j] = _mm256_setzero_ps();
      acc_min[j] = _mm_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const kq_x86::K4Block blk = kq_x86::k4_block<kFiveBit>(first + i * static_cast<int64_t>(block_bytes));
      const uint8_t* qs = blk.qs;
      const float wd = blk.d, wdmin = blk.dmin;

      const __m256i scales_mins = blk.scales_mins;
      const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
      const __m128i sc_lane = _mm256_castsi256_si128(scales_mins);
      const __m256i sc = _mm256_set_m128i(sc_lane, sc_lane);
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kFiveBit) hbits = kq_x86::load256(blk.qh);

      __m256i sum_lo[N], sum_hi[N];
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        const __m256i bsums = kq_x86::load256(y[j][i].bsums);
        const __m128i sub_sums =
            _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const float dmin = y[j][i].d * wdmin;
        acc_min[j] =
            _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, sub_sums)), acc_min[j]);
        sum_lo[j] = sum_hi[j] = _mm256_setzero_si256();
      }
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        __m256i q_lo, q_hi;
        kq_x86::k4_chunk_quants<kFiveBit>(qs, hbits, c, m4, one, q_lo, q_hi);
        const __m256i s_lo = kq_x86::broadcast_scale(sc, 2 * c);
        const __m256i s_hi = kq_x86::broadcast_scale(sc, 2 * c + 1);
#pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
          const __m256i p_lo = _mm256_maddubs_epi16(q_lo, kq_x86::load256(y[j][i].qs + 64 * c));
          const __m256i p_hi = _mm256_maddubs_epi16(q_hi, kq_x86::load256(y[j][i].qs + 64 * c + 32));
          sum_lo[j] = madd_acc(sum_lo[j], s_lo, p_lo);
          sum_hi[j] = madd_acc(sum_hi[j], s_hi, p_hi);
        }
      }
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        const float d = y[j][i].d * wd;
        const __m256i sumi = _mm256_add_epi32(sum_lo[j], sum_hi[j]);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[j]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      __m128 m = _mm_add_ps(acc_min[j], _mm_movehl_ps(acc_min[j], acc_min[j]));
      m = _mm_add_ss(m, _mm_movehdup_ps(m));
      out[j] = avx2::hsum(acc[j]) - _mm_cvtss_f32(m);
    }
  }
};

// Q6_K: mirrors dot_q6_k.
struct Q6KCols {
  template <int N>
  SLUICE_DOT_COLS_TARGET static void run(int64_t n, const void* w, const void* const* act, float* out) {
    const auto* wb = static_cast<const BlockQ6K*>(w);
    const BlockQ8K* y[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
    __m256 acc[N];
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const BlockQ6K& b = wb[i];
      const float wd = avx2::fp16_scalar(b.d);
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      __m256i sum_a[N], sum_b[N];
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) sum_a[j] = sum_b[j] = _mm256_setzero_si256();
      for (int half = 0; half < 2; ++half) {
        const __m128i lane = _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_srli_si128(scales8, 8));
        const __m256i sc = _mm256_set_m128i(lane, lane);
        __m256i q[4];
        kq_x86::q6k_half_quants(b, half, q);
        const __m256i s0 = kq_x86::pair_scales(sc, 0), s1 = kq_x86::pair_scales(sc, 1);
        const __m256i s2 = kq_x86::pair_scales(sc, 2), s3 = kq_x86::pair_scales(sc, 3);
#pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
          const int8_t* q8 = y[j][i].qs + 128 * half;
          sum_a[j] = madd_acc(sum_a[j], s0, _mm256_maddubs_epi16(q[0], kq_x86::load256(q8)));
          sum_b[j] = madd_acc(sum_b[j], s1, _mm256_maddubs_epi16(q[1], kq_x86::load256(q8 + 32)));
          sum_a[j] = madd_acc(sum_a[j], s2, _mm256_maddubs_epi16(q[2], kq_x86::load256(q8 + 64)));
          sum_b[j] = madd_acc(sum_b[j], s3, _mm256_maddubs_epi16(q[3], kq_x86::load256(q8 + 96)));
        }
      }
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        // q in 0..63 means q - 32: take 32 * scale * bsum out per sub-block.
        const __m256i offset =
            _mm256_slli_epi32(_mm256_madd_epi16(scales16, kq_x86::load256(y[j][i].bsums)), 5);
        const float d = y[j][i].d * wd;
        const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(sum_a[j], sum_b[j]), offset);
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc[j]);
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) out[j] = avx2::hsum(acc[j]);
  }
};
