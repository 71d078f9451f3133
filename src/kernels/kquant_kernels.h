// Internal: the K-quant kernel functions, one set per ISA, wired into the
// dispatch table by kquant_kernels.cpp. Signatures and contracts are those of
// kernels/quant.h (n is a multiple of 256; pure, thread-safe, no allocation).
// Not for use outside src/kernels and its tests.
#pragma once

#include <cstdint>

namespace sluice::kernels::kquant {

// --- scalar reference (kquant_scalar.cpp) ---
void dequantize_q2_k(const void* src, float* dst, int64_t n);
void dequantize_q3_k(const void* src, float* dst, int64_t n);
void dequantize_q4_k(const void* src, float* dst, int64_t n);
void dequantize_q5_k(const void* src, float* dst, int64_t n);
void dequantize_q6_k(const void* src, float* dst, int64_t n);
void dequantize_q8_k(const void* src, float* dst, int64_t n);
void dequantize_iq4_xs(const void* src, float* dst, int64_t n);

// Weight row `w` times a Q8_K activation row `a`.
float vec_dot_q2_k_scalar(int64_t n, const void* w, const void* a);
float vec_dot_q3_k_scalar(int64_t n, const void* w, const void* a);
float vec_dot_q4_k_scalar(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_scalar(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_scalar(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_scalar(int64_t n, const void* w, const void* a);

// --- quantization (kquant_quantize.cpp): ggml's reference algorithms (no
// importance matrix), so files we write quantize like llama.cpp's tools. ---
void quantize_q2_k(const float* src, void* dst, int64_t n);
void quantize_q3_k(const float* src, void* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);  // bit-exact with ggml's quantize_row_q8_K_ref
void quantize_iq4_xs(const float* src, void* dst, int64_t n);

// --- AVX2+FMA+F16C (kquant_avx2.cpp); only call when the CPU has them. ---
float vec_dot_q2_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q3_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q4_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_avx2(int64_t n, const void* w, const void* a);
float vec_dot_iq4_xs_avx2(int64_t n, const void* w, const void* a);
// Bit-identical to quantize_q8_k (kquant_avx2_quantize.cpp).
void quantize_q8_k_avx2(const float* src, void* dst, int64_t n);

// --- AVX-VNNI (kquant_vnni.cpp), on top of AVX2+FMA+F16C; only call when the
// CPU has AVX-VNNI. Each is bit-identical to the AVX2 function of its type. ---
float vec_dot_q4_k_vnni(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_vnni(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_vnni(int64_t n, const void* w, const void* a);

// --- AVX-512 F/BW/VL/VNNI (kquant_avx512.cpp), on top of AVX2+FMA+F16C; only
// call when the CPU has them. Each is bit-identical to the AVX2 function. ---
float vec_dot_q4_k_avx512(int64_t n, const void* w, const void* a);
float vec_dot_q5_k_avx512(int64_t n, const void* w, const void* a);
float vec_dot_q6_k_avx512(int64_t n, const void* w, const void* a);

}  // namespace sluice::kernels::kquant
