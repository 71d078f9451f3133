// AVX2 multi-column dot products (TypeKernels::vec_dot_cols): one weight row
// against up to kMaxDotCols activation rows. The weight block is loaded and
// decoded (nibble unpacking, scale unpacking, sign handling) once and reused for
// every column; each column keeps its own accumulators.
//
// Contract (quant.h): out[j] is bit-identical to the AVX2 vec_dot of the same
// type. Every function below therefore mirrors its single-column counterpart
// (legacy_avx2_dot.cpp, kquant_avx2.cpp) operation for operation on the float
// side: same per-block scale products, same FMA chain per accumulator, same
// final reduction. Integer partial sums are exact, so how they are grouped does
// not matter. tests/unit/kernels_gemm_test.cpp checks the bit-identity.
#include "kernels/kernel_table.h"

#if defined(__x86_64__)

#include "kernels/kquant_x86_common.h"

namespace sluice::kernels {
namespace cols_avx2 {
namespace {

using avx2::fp16_scalar;
using avx2::hsum;
using kq_x86::load256;

// Every per-column loop below is fully unrolled (#pragma GCC unroll): the
// per-column accumulators are arrays, which stay in registers only when every
// index is a constant.

// Calls Kernel::template run<N>(n, w, act, out) with N = n_act (1..4).
template <class Kernel>
SLUICE_AVX2 void dispatch_cols(int64_t n, const void* w, const void* const* act, int n_act, float* out) {
  switch (n_act) {
    case 1: Kernel::template run<1>(n, w, act, out); break;
    case 2: Kernel::template run<2>(n, w, act, out); break;
    case 3: Kernel::template run<3>(n, w, act, out); break;
    default: Kernel::template run<4>(n, w, act, out); break;
  }
}

// ---- Symmetric legacy formats with Q8_0 activations (mirrors dot_symmetric) ----

template <class W>
struct SymmetricCols {
  // One weight block (block index i + di of every column): |levels| once; the
  // weight's signs are moved onto each column (the dot_i8 sign-transfer trick,
  // split so the weight half is shared).
  template <int N>
  SLUICE_AVX2 static void block(const typename W::Block& xb, const BlockQ8_0* const* y, int64_t i, __m256* acc,
                                int64_t di = 0) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lv = W::levels(xb);
    const __m256i ax = _mm256_sign_epi8(lv, lv);
    const float s = W::scale(xb);
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const BlockQ8_0& yb = y[j][i + di];
      const __m256i sy = _mm256_sign_epi8(load256(yb.qs), lv);
      const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), ones));
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(s * fp16_scalar(yb.d)), p, acc[j]);
    }
  }

  template <int N>
  SLUICE_AVX2 static void run(int64_t n, const void* w, const void* const* act, float* out) {
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
    for (int j = 0; j < N; ++j) out[j] = hsum(_mm256_add_ps(acc0[j], acc1[j]));
  }
};

// ---- Plain formats (mirrors dot_plain: 4 accumulators per column) ----

struct F32Load {
  using Elem = float;
  SLUICE_AVX2 static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float scalar(float v) { return v; }
};
struct F16Load {
  using Elem = uint16_t;
  SLUICE_AVX2 static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  SLUICE_AVX2 static float scalar(uint16_t v) { return _cvtsh_ss(v); }
};

template <class L>
struct PlainCols {
  // Four accumulators per column: more than two columns at once would spill
  // them, so wider calls are served two columns at a time.
  template <int N>
  SLUICE_AVX2 static void run(int64_t n, const void* w, const void* const* act, float* out) {
    if constexpr (N > 2) {
      run<2>(n, w, act, out);
      run<N - 2>(n, w, act + 2, out + 2);
    } else {
      const auto* x = static_cast<const typename L::Elem*>(w);
      const typename L::Elem* y[N];
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) y[j] = static_cast<const typename L::Elem*>(act[j]);
      __m256 a0[N], a1[N], a2[N], a3[N];
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) a0[j] = a1[j] = a2[j] = a3[j] = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 32 <= n; i += 32) {
        const __m256 x0 = L::load(x + i), x1 = L::load(x + i + 8);
        const __m256 x2 = L::load(x + i + 16), x3 = L::load(x + i + 24);
        #pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
          a0[j] = _mm256_fmadd_ps(x0, L::load(y[j] + i), a0[j]);
          a1[j] = _mm256_fmadd_ps(x1, L::load(y[j] + i + 8), a1[j]);
          a2[j] = _mm256_fmadd_ps(x2, L::load(y[j] + i + 16), a2[j]);
          a3[j] = _mm256_fmadd_ps(x3, L::load(y[j] + i + 24), a3[j]);
        }
      }
      const int64_t tail8 = i;
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        int64_t k = tail8;
        for (; k + 8 <= n; k += 8) a0[j] = _mm256_fmadd_ps(L::load(x + k), L::load(y[j] + k), a0[j]);
        float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0[j], a1[j]), _mm256_add_ps(a2[j], a3[j])));
        for (; k < n; ++k) sum += L::scalar(x[k]) * L::scalar(y[j][k]);
        out[j] = sum;
      }
    }
  }
};

// ---- K-quants with Q8_K activations ----

// Scale unpacking and shuffles shared with the AVX-VNNI kernels: kquant_x86_common.h.
using kq_x86::broadcast_scale;
using kq_x86::pair_scales;
using kq_x86::unpack_k4_scales;

// Q4_K (kFiveBit = false) and Q5_K: mirrors vec_dot_k4_style.
template <bool kFiveBit>
struct K4StyleCols {
  template <int N>
  SLUICE_AVX2 static void run(int64_t n, const void* w, const void* const* act, float* out) {
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
      const uint8_t* blk = first + i * static_cast<int64_t>(block_bytes);
      uint16_t dh, dminh;
      std::memcpy(&dh, blk, 2);
      std::memcpy(&dminh, blk + 2, 2);
      const uint8_t* qh = blk + 4 + kKScaleBytes;
      const uint8_t* qs = kFiveBit ? qh + kQK_K / 8 : blk + 4 + kKScaleBytes;
      const float wd = fp16_scalar(dh), wdmin = fp16_scalar(dminh);

      const __m256i scales_mins = _mm256_cvtepu8_epi16(unpack_k4_scales(blk + 4));
      const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
      const __m128i sc_lane = _mm256_castsi256_si128(scales_mins);
      const __m256i sc = _mm256_set_m128i(sc_lane, sc_lane);
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kFiveBit) hbits = load256(qh);

      __m256i sumi[N];
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        const __m256i bsums = load256(y[j][i].bsums);
        const __m128i sub_sums =
            _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const float dmin = y[j][i].d * wdmin;
        acc_min[j] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, sub_sums)), acc_min[j]);
        sumi[j] = _mm256_setzero_si256();
      }
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i bits = load256(qs + 32 * c);
        __m256i q_lo = _mm256_and_si256(bits, m4);
        __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        if constexpr (kFiveBit) {
          const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
          const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
          q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
          q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
        }
        const __m256i s_lo = broadcast_scale(sc, 2 * c);
        const __m256i s_hi = broadcast_scale(sc, 2 * c + 1);
        #pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
          const __m256i p_lo = _mm256_maddubs_epi16(q_lo, load256(y[j][i].qs + 64 * c));
          const __m256i p_hi = _mm256_maddubs_epi16(q_hi, load256(y[j][i].qs + 64 * c + 32));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(s_lo, p_lo));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(s_hi, p_hi));
        }
      }
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        const float d = y[j][i].d * wd;
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
      }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      __m128 m = _mm_add_ps(acc_min[j], _mm_movehl_ps(acc_min[j], acc_min[j]));
      m = _mm_add_ss(m, _mm_movehdup_ps(m));
      out[j] = hsum(acc[j]) - _mm_cvtss_f32(m);
    }
  }
};

// Q6_K: mirrors vec_dot_q6_k_avx2.
struct Q6KCols {
  template <int N>
  SLUICE_AVX2 static void run(int64_t n, const void* w, const void* const* act, float* out) {
    const auto* wb = static_cast<const BlockQ6K*>(w);
    const BlockQ8K* y[N];
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) y[j] = static_cast<const BlockQ8K*>(act[j]);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m_b01 = _mm256_set1_epi8(0x03);
    const __m256i m_b23 = _mm256_set1_epi8(0x0C);
    const __m256i m_b45 = _mm256_set1_epi8(0x30);
    __m256 acc[N];
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const BlockQ6K& b = wb[i];
      const float wd = fp16_scalar(b.d);
      const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
      __m256i sumi[N];
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) sumi[j] = _mm256_setzero_si256();
      for (int half = 0; half < 2; ++half) {
        const __m128i lane = _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_srli_si128(scales8, 8));
        const __m256i sc = _mm256_set_m128i(lane, lane);
        const __m256i ql0 = load256(b.ql + 64 * half);
        const __m256i ql1 = load256(b.ql + 64 * half + 32);
        const __m256i qh = load256(b.qh + 32 * half);
        const __m256i q0 =
            _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m_b01), 4));
        const __m256i q1 =
            _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m_b23), 2));
        const __m256i q2 =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m_b45));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m_b45));
        const __m256i s0 = pair_scales(sc, 0), s1 = pair_scales(sc, 1);
        const __m256i s2 = pair_scales(sc, 2), s3 = pair_scales(sc, 3);
        #pragma GCC unroll 4
        for (int j = 0; j < N; ++j) {
          const int8_t* q8 = y[j][i].qs + 128 * half;
          const __m256i p0 = _mm256_madd_epi16(s0, _mm256_maddubs_epi16(q0, load256(q8)));
          const __m256i p1 = _mm256_madd_epi16(s1, _mm256_maddubs_epi16(q1, load256(q8 + 32)));
          const __m256i p2 = _mm256_madd_epi16(s2, _mm256_maddubs_epi16(q2, load256(q8 + 64)));
          const __m256i p3 = _mm256_madd_epi16(s3, _mm256_maddubs_epi16(q3, load256(q8 + 96)));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3)));
        }
      }
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) {
        // q in 0..63 means q - 32: take 32 * scale * bsum out per sub-block.
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(y[j][i].bsums)), 5);
        const float d = y[j][i].d * wd;
        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[j], offset)), acc[j]);
      }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
  }
};

}  // namespace

void fill_avx2(KernelTable& table) {
  auto set = [&](GgmlType t, VecDotColsFn fn) { table[static_cast<uint32_t>(t)].vec_dot_cols = fn; };
  set(GgmlType::F32, &dispatch_cols<PlainCols<F32Load>>);
  set(GgmlType::F16, &dispatch_cols<PlainCols<F16Load>>);
  set(GgmlType::Q4_0, &dispatch_cols<SymmetricCols<avx2::Q4_0Levels>>);
  set(GgmlType::Q8_0, &dispatch_cols<SymmetricCols<avx2::Q8_0Levels>>);
  set(GgmlType::Q4_K, &dispatch_cols<K4StyleCols<false>>);
  set(GgmlType::Q5_K, &dispatch_cols<K4StyleCols<true>>);
  set(GgmlType::Q6_K, &dispatch_cols<Q6KCols>);
}

}  // namespace cols_avx2

namespace cols_vnni {
void fill_vnni(KernelTable& table);  // dot_cols_vnni.cpp
}  // namespace cols_vnni
}  // namespace sluice::kernels

#endif  // __x86_64__

namespace sluice::kernels {

void fill_dot_cols_kernels(KernelTable& table, Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      // No scalar multi-column kernels: dot_cols() loops over the scalar
      // vec_dot, which is exactly what a scalar version would have to compute.
      break;
    case Isa::Avx2:
#if defined(__x86_64__)
      cols_avx2::fill_avx2(table);
#endif
      break;
    case Isa::Neon:
      // Slot for NEON multi-column dots (same shape: decode the weight block
      // once, vdotq_s32 per column). None yet.
      break;
    case Isa::AvxVnni:
#if defined(__x86_64__)
      cols_vnni::fill_vnni(table);
#endif
      break;
  }
}

}  // namespace sluice::kernels
