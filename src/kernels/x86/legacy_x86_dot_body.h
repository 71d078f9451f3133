// The block loops of the legacy-format dot products, shared by the AVX2 and
// AVX-VNNI kernels so both accumulate in exactly the same order (their
// results are bit-identical; tests/unit/kernels_vnni_test.cpp checks it).
//
// Not a normal header: included (on purpose without an include guard) inside
// the namespace of each ISA's kernels, after that file has defined
//   SLUICE_LEGACY_DOT_TARGET  the function target attribute of the ISA,
//   dot_i8(x, y)              eight int32 lanes, each the sum of four s8 x s8 products,
//   dot_u8_i8(u, y)           the same for u8 x s8,
// and made fp16_scalar, hsum and the level/block types visible. The includer
// #undefs SLUICE_LEGACY_DOT_TARGET afterwards.

// Symmetric weights with Q8_0 activations.
template <class W>
SLUICE_LEGACY_DOT_TARGET float dot_symmetric(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename W::Block*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(act);
  const int64_t nb = n / kLegacyBlock;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
    const __m256 p0 = _mm256_cvtepi32_ps(dot_i8(W::levels(x[i]), a0));
    const __m256 p1 = _mm256_cvtepi32_ps(dot_i8(W::levels(x[i + 1]), a1));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(W::scale(x[i]) * fp16_scalar(y[i].d)), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(W::scale(x[i + 1]) * fp16_scalar(y[i + 1].d)), p1, acc1);
  }
  if (i < nb) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
    const __m256 p0 = _mm256_cvtepi32_ps(dot_i8(W::levels(x[i]), a0));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(W::scale(x[i]) * fp16_scalar(y[i].d)), p0, acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// Offset weights (x = d q + m) with Q8_1 activations (a = d_a q_a, s = d_a
// sum q_a): sum x a = d d_a sum(q q_a) + m s per block.
template <class W>
SLUICE_LEGACY_DOT_TARGET float dot_offset(int64_t n, const void* w, const void* act) {
  const auto* x = static_cast<const typename W::Block*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(act);
  const int64_t nb = n / kLegacyBlock;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float offsets = 0.0f;
  int64_t i = 0;
  for (; i + 1 < nb; i += 2) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i + 1].qs));
    const __m256 p0 = _mm256_cvtepi32_ps(dot_u8_i8(W::levels(x[i]), a0));
    const __m256 p1 = _mm256_cvtepi32_ps(dot_u8_i8(W::levels(x[i + 1]), a1));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(W::scale(x[i]) * fp16_scalar(y[i].d)), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(W::scale(x[i + 1]) * fp16_scalar(y[i + 1].d)), p1, acc1);
    offsets += W::offset(x[i]) * fp16_scalar(y[i].s) + W::offset(x[i + 1]) * fp16_scalar(y[i + 1].s);
  }
  if (i < nb) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs));
    const __m256 p0 = _mm256_cvtepi32_ps(dot_u8_i8(W::levels(x[i]), a0));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(W::scale(x[i]) * fp16_scalar(y[i].d)), p0, acc0);
    offsets += W::offset(x[i]) * fp16_scalar(y[i].s);
  }
  return hsum(_mm256_add_ps(acc0, acc1)) + offsets;
}
