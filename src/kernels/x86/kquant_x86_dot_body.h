// The block loops of the Q4_K, Q5_K and Q6_K dot products (one weight row, one
// Q8_K activation row), shared by every x86 ISA so all of them accumulate in
// exactly the same order: their results are bit-identical
// (tests/unit/kernels_vnni_test.cpp checks it).
//
// Per super-block the loops form eight int32 lanes
//   sumi[m] = sum over 32-byte runs r of scale_r * (p_r[2m] + p_r[2m+1])
// with p_r = maddubs(quants, activations) (int16 pairs; never saturating for
// these ranges), then do all float work on those lanes. How the integer
// multiply-add by the sub-block scales is done is the only ISA difference:
// integer sums are exact, so any grouping of them gives the same lanes.
//
// Not a normal header: included (on purpose without an include guard) inside
// a namespace of each ISA's kernels, after that file has defined
//   SLUICE_KQUANT_DOT_TARGET  the function target attribute of the ISA,
//   madd_acc(acc, s, p)       acc + madd_epi16(s, p) as eight int32 lanes,
// and made kq_x86 (kquant_x86_common.h), avx2::hsum and avx2::fp16_scalar
// visible. The includer #undefs SLUICE_KQUANT_DOT_TARGET afterwards.

// Q4_K (kFiveBit = false) and Q5_K (ORs in a fifth bit from qh). Blocks are
// addressed as bytes because the two structs differ in size but share the d,
// dmin, scales prefix.
template <bool kFiveBit>
SLUICE_KQUANT_DOT_TARGET inline float dot_k4_style(int64_t n, const uint8_t* first_block, size_t block_bytes,
                                                   const BlockQ8K* ab) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const kq_x86::K4Block blk = kq_x86::k4_block<kFiveBit>(first_block + i * static_cast<int64_t>(block_bytes));
    const BlockQ8K& y = ab[i];
    const uint8_t* qs = blk.qs;
    const float d = y.d * blk.d;
    const float dmin = y.d * blk.dmin;

    const __m256i scales_mins = blk.scales_mins;
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m256i bsums = kq_x86::load256(y.bsums);
    const __m128i sub_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
    acc_min = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, sub_sums)), acc_min);

    const __m128i sc_lane = _mm256_castsi256_si128(scales_mins);
    const __m256i sc = _mm256_set_m128i(sc_lane, sc_lane);
    __m256i hbits = _mm256_setzero_si256();
    if constexpr (kFiveBit) hbits = kq_x86::load256(blk.qh);
    // Two integer accumulators halve the dependency chain (same lane sums).
    __m256i sum_lo = _mm256_setzero_si256(), sum_hi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m256i q_lo, q_hi;
      kq_x86::k4_chunk_quants<kFiveBit>(qs, hbits, c, m4, one, q_lo, q_hi);
      const __m256i p_lo = _mm256_maddubs_epi16(q_lo, kq_x86::load256(y.qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(q_hi, kq_x86::load256(y.qs + 64 * c + 32));
      sum_lo = madd_acc(sum_lo, kq_x86::broadcast_scale(sc, 2 * c), p_lo);
      sum_hi = madd_acc(sum_hi, kq_x86::broadcast_scale(sc, 2 * c + 1), p_hi);
    }
    const __m256i sumi = _mm256_add_epi32(sum_lo, sum_hi);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  acc_min = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  acc_min = _mm_add_ss(acc_min, _mm_movehdup_ps(acc_min));
  return avx2::hsum(acc) - _mm_cvtss_f32(acc_min);
}

SLUICE_KQUANT_DOT_TARGET inline float dot_q6_k(int64_t n, const void* w, const void* a) {
  const auto* wb = static_cast<const BlockQ6K*>(w);
  const auto* ab = static_cast<const BlockQ8K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const BlockQ6K& b = wb[i];
    const BlockQ8K& y = ab[i];
    const float d = y.d * avx2::fp16_scalar(b.d);

    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    // Quants are stored as q in 0..63 meaning q - 32: take 32 * scale * bsum out per sub-block.
    const __m256i offset =
        _mm256_slli_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(scales8), kq_x86::load256(y.bsums)), 5);
    __m256i sum_a = _mm256_setzero_si256(), sum_b = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const __m128i lane = _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_srli_si128(scales8, 8));
      const __m256i sc = _mm256_set_m128i(lane, lane);
      __m256i q[4];
      kq_x86::q6k_half_quants(b, half, q);
      const int8_t* q8 = y.qs + 128 * half;
      sum_a = madd_acc(sum_a, kq_x86::pair_scales(sc, 0), _mm256_maddubs_epi16(q[0], kq_x86::load256(q8)));
      sum_b = madd_acc(sum_b, kq_x86::pair_scales(sc, 1), _mm256_maddubs_epi16(q[1], kq_x86::load256(q8 + 32)));
      sum_a = madd_acc(sum_a, kq_x86::pair_scales(sc, 2), _mm256_maddubs_epi16(q[2], kq_x86::load256(q8 + 64)));
      sum_b = madd_acc(sum_b, kq_x86::pair_scales(sc, 3), _mm256_maddubs_epi16(q[3], kq_x86::load256(q8 + 96)));
    }
    const __m256i sumi = _mm256_sub_epi32(_mm256_add_epi32(sum_a, sum_b), offset);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  return avx2::hsum(acc);
}
