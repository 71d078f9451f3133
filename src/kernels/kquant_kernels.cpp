// Registers the K-quant family (Q2_K..Q6_K, Q8_K, IQ4_XS) in the dispatch table.
// All weight types here dot with Q8_K activations. Q8_K itself is an
// activation-only type: quantize + dequantize, no vec_dot.
#include "kernels/kernel_table.h"
#include "kernels/kquant_kernels.h"

namespace sluice::kernels {
namespace {

using namespace kquant;

void set(KernelTable& table, GgmlType t, DequantizeFn dq, QuantizeFn q, VecDotFn dot) {
  TypeKernels& k = table[static_cast<uint32_t>(t)];
  k.dequantize = dq;
  k.quantize = q;
  k.vec_dot = dot;
  k.vec_dot_type = GgmlType::Q8_K;
}

}  // namespace

void fill_kquant_scalar(KernelTable& table) {
  set(table, GgmlType::Q2_K, dequantize_q2_k, quantize_q2_k, vec_dot_q2_k_scalar);
  set(table, GgmlType::Q3_K, dequantize_q3_k, quantize_q3_k, vec_dot_q3_k_scalar);
  set(table, GgmlType::Q4_K, dequantize_q4_k, quantize_q4_k, vec_dot_q4_k_scalar);
  set(table, GgmlType::Q5_K, dequantize_q5_k, quantize_q5_k, vec_dot_q5_k_scalar);
  set(table, GgmlType::Q6_K, dequantize_q6_k, quantize_q6_k, vec_dot_q6_k_scalar);
  set(table, GgmlType::IQ4_XS, dequantize_iq4_xs, quantize_iq4_xs, vec_dot_iq4_xs_scalar);
  set(table, GgmlType::Q8_K, dequantize_q8_k, quantize_q8_k, nullptr);
}

// SIMD entries carry only what has a SIMD version; the registry falls back to
// scalar for the rest (dequantize, quantize).
#if defined(__x86_64__)
void fill_kquant_avx2(KernelTable& table) {
  set(table, GgmlType::Q2_K, nullptr, nullptr, vec_dot_q2_k_avx2);
  set(table, GgmlType::Q3_K, nullptr, nullptr, vec_dot_q3_k_avx2);
  set(table, GgmlType::Q4_K, nullptr, nullptr, vec_dot_q4_k_avx2);
  set(table, GgmlType::Q5_K, nullptr, nullptr, vec_dot_q5_k_avx2);
  set(table, GgmlType::Q6_K, nullptr, nullptr, vec_dot_q6_k_avx2);
  set(table, GgmlType::IQ4_XS, nullptr, nullptr, vec_dot_iq4_xs_avx2);
  set(table, GgmlType::Q8_K, nullptr, quantize_q8_k_avx2, nullptr);  // activation-only: no vec_dot
}

// AVX-VNNI versions of the hottest dot products; the other types keep their
// AVX2 entries (the registry overlays this table on the AVX2 one).
void fill_kquant_vnni(KernelTable& table) {
  set(table, GgmlType::Q4_K, nullptr, nullptr, vec_dot_q4_k_vnni);
  set(table, GgmlType::Q5_K, nullptr, nullptr, vec_dot_q5_k_vnni);
  set(table, GgmlType::Q6_K, nullptr, nullptr, vec_dot_q6_k_vnni);
}

// AVX-512 VNNI: the types with 512-bit multi-column dots need a vec_dot of
// the same ISA (the registry pairs the two); the rest keep lower entries.
void fill_kquant_avx512(KernelTable& table) {
  set(table, GgmlType::Q4_K, nullptr, nullptr, vec_dot_q4_k_avx512);
  set(table, GgmlType::Q5_K, nullptr, nullptr, vec_dot_q5_k_avx512);
  set(table, GgmlType::Q6_K, nullptr, nullptr, vec_dot_q6_k_avx512);
}
#endif  // __x86_64__

}  // namespace sluice::kernels
