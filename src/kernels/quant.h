// Quantized-format kernels: dequantize, quantize, and the fused dot product of
// a weight row with an activation row quantized to the weight's vec_dot_type.
//
// Contracts (every implementation, every ISA):
//  - n is the element count of the row and must be a multiple of the type's
//    block size (callers guarantee it; kernels do not check).
//  - dequantize/quantize/vec_dot are pure functions of their inputs; they are
//    thread-safe and allocate nothing.
//  - vec_dot(n, w, a) returns sum_i dequant(w)[i] * dequant(a)[i], where `a` is
//    a row of `vec_dot_type` blocks (e.g. Q8_0 for Q4_0 weights, Q8_K for
//    K-quants, F32 for F32). The scalar version is the reference; SIMD versions
//    match it within a documented tolerance (tests/unit/kernels_*.cpp).
//  - For a given (type, isa) the result is deterministic (fixed summation order).
#pragma once

#include <cstdint>

#include "util/ggml_type.h"

namespace sluice::kernels {

// Kernel sets. A later value overrides an earlier one in kernels_for(t) where
// both are available. AvxVnni = Avx2 plus AVX-VNNI (vpdpbusd/vpdpwssd);
// Avx512Vnni = Avx2 plus AVX-512 F/BW/VL/VNNI (512-bit integer multiply-adds,
// 32 registers; used for the K-quant prefill dots). Their entries are partial
// (only the integer dot products) and each is BIT-IDENTICAL to the Avx2 entry
// of the same type, so every x86 machine computes the same logits.
enum class Isa { Scalar = 0, Avx2 = 1, Neon = 2, AvxVnni = 3, Avx512Vnni = 4 };
inline constexpr int kIsaCount = 5;
const char* isa_name(Isa isa);

using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
using VecDotFn = float (*)(int64_t n, const void* w, const void* act);
// Multi-column dot: out[j] = vec_dot(n, w, act[j]) for 0 <= j < n_act, with
// 1 <= n_act <= kMaxDotCols. One weight row against several activation rows
// (positions), so the weight row is loaded and decoded once per call instead of
// once per position. Contract: each out[j] is BIT-IDENTICAL to the vec_dot of
// the same TypeKernels entry (same per-output summation order), so callers may
// mix the two paths freely without affecting results.
using VecDotColsFn = void (*)(int64_t n, const void* w, const void* const* act, int n_act, float* out);
inline constexpr int kMaxDotCols = 8;

struct TypeKernels {
  DequantizeFn dequantize = nullptr;  // every supported weight type
  QuantizeFn quantize = nullptr;      // types we write, and every vec_dot_type
  VecDotFn vec_dot = nullptr;         // every supported weight type
  GgmlType vec_dot_type = GgmlType::F32;
  // Optional (nullptr = not available; use dot_cols() below, which falls back
  // to a loop over vec_dot). The registry only pairs it with the vec_dot of the
  // same ISA, which is what makes the bit-identity contract hold.
  VecDotColsFn vec_dot_cols = nullptr;
};

// out[j] = k.vec_dot(n, w, act[j]) for j < n_act (any n_act >= 0), through
// k.vec_dot_cols in groups of kMaxDotCols when available, else one vec_dot per
// column. Results are the same either way.
void dot_cols(const TypeKernels& k, int64_t n, const void* w, const void* const* act, int n_act, float* out);

// The fastest kernels this CPU runs for type t (chosen once, thread-safe).
// Throws sluice::Error("unsupported tensor type X") if t has no kernels at all.
// Activation-only types (Q8_1, Q8_K) have quantize but no vec_dot: check
// is_supported() before treating a type as a weight format.
const TypeKernels& kernels_for(GgmlType t);

// One specific implementation: nullptr when that ISA has no version of t or the
// CPU lacks the ISA. Entries may be partial (e.g. AVX2 with only vec_dot);
// missing functions are nullptr. Used by tests and benchmarks.
const TypeKernels* kernels_for(GgmlType t, Isa isa);

// True if sluice can compute with weights of type t (dequantize + vec_dot).
bool is_supported(GgmlType t);

// The ISA used by kernels_for(t) for vec_dot, for telemetry.
Isa best_isa();

// Convenience wrappers over kernels_for(t).
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);  // throws if t is not writable

}  // namespace sluice::kernels
