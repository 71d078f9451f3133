// The one dispatch table of the kernels library: quant kernels per type and
// element-wise ops, per ISA and the best set this CPU runs (kernel_table.h).
#include <string>

#include "kernels/kernel_table.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace sluice::kernels {
namespace {

// One case per ISA: whether this CPU runs it, and its fill function
// (kernel_table.h). Isa order is overlay order: a later ISA's entries replace
// an earlier one's in kernels_for(t) and ops().
struct IsaEntry {
  bool available = false;
  void (*fill)(IsaKernels&) = nullptr;
};

IsaEntry isa_entry(Isa isa) {
  const CpuFeatures& f = cpu_features();
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  switch (isa) {
    case Isa::Scalar: return {true, fill_isa_scalar};
    case Isa::Avx2: return {avx2, fill_isa_avx2};
    case Isa::Neon: return {f.neon, fill_isa_neon};
    case Isa::AvxVnni: return {avx2 && f.avxvnni, fill_isa_avx_vnni};
    case Isa::Avx512Vnni: return {avx2 && f.avx512vnni, fill_isa_avx512_vnni};
    case Isa::Amx: return {avx2 && f.avx512vnni && f.amx_int8, fill_isa_amx};
    case Isa::NeonI8mm: return {f.neon && f.neon_dotprod && f.neon_i8mm, fill_isa_neon_i8mm};
  }
  return {};
}

bool isa_available(Isa isa) { return isa_entry(isa).available; }

// Replaces the ops of `dst` that `src` has.
void overlay(OpsKernels& dst, const OpsKernels& src) {
  if (src.dot) dst.dot = src.dot;
  if (src.axpy) dst.axpy = src.axpy;
  if (src.dot_rows) dst.dot_rows = src.dot_rows;
  if (src.weighted_sum_rows) dst.weighted_sum_rows = src.weighted_sum_rows;
  if (src.add) dst.add = src.add;
  if (src.sum_squares) dst.sum_squares = src.sum_squares;
  if (src.scale_mul) dst.scale_mul = src.scale_mul;
  if (src.exp_sub_sum) dst.exp_sub_sum = src.exp_sub_sum;
  if (src.swiglu) dst.swiglu = src.swiglu;
  if (src.rope_neox) dst.rope_neox = src.rope_neox;
  if (src.rope_norm) dst.rope_norm = src.rope_norm;
  if (src.conv_step) dst.conv_step = src.conv_step;
  if (src.delta_step) dst.delta_step = src.delta_step;
}

bool has_any_op(const OpsKernels& k) {
  return k.dot || k.axpy || k.dot_rows || k.weighted_sum_rows || k.add || k.sum_squares || k.scale_mul ||
         k.exp_sub_sum || k.swiglu || k.rope_neox || k.rope_norm || k.conv_step ||
         k.delta_step;
}

struct Tables {
  std::array<IsaKernels, kIsaCount> per_isa{};
  KernelTable best{};
  OpsKernels best_ops{};
  Isa best_isa = Isa::Scalar;
};

const Tables& tables() {
  static const Tables t = [] {
    Tables t;
    for (int i = 0; i < kIsaCount; ++i) {
      const IsaEntry e = isa_entry(static_cast<Isa>(i));
      if (e.available) e.fill(t.per_isa[i]);
    }
    t.best = t.per_isa[0].quant;
    t.best_ops = t.per_isa[0].ops;
    for (int i = 1; i < kIsaCount; ++i) {
      if (!isa_available(static_cast<Isa>(i))) continue;
      overlay(t.best_ops, t.per_isa[i].ops);
      for (uint32_t ty = 0; ty < kGgmlTypeCount; ++ty) {
        const TypeKernels& k = t.per_isa[i].quant[ty];
        if (k.dequantize) t.best[ty].dequantize = k.dequantize;
        if (k.quantize) t.best[ty].quantize = k.quantize;
        if (k.vec_dot) {
          t.best[ty].vec_dot = k.vec_dot;
          // The multi-column dot must come from the same ISA as vec_dot (it is
          // bit-identical only to its own ISA's vec_dot); none there -> none.
          t.best[ty].vec_dot_cols = k.vec_dot_cols;
          t.best[ty].prepare_tile = k.prepare_tile;
          t.best[ty].gemm_tile = k.gemm_tile;
          t.best[ty].pack_rows = k.pack_rows;
          t.best[ty].packed_dot = k.packed_dot;
          t.best[ty].prepare_packed = k.prepare_packed;
          t.best[ty].packed_dot_prepared = k.packed_dot_prepared;
          t.best_isa = static_cast<Isa>(i);
        }
      }
    }
    return t;
  }();
  return t;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Neon: return "neon";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512Vnni: return "avx512vnni";
    case Isa::Amx: return "amx";
    case Isa::NeonI8mm: return "neon-i8mm";
  }
  return "?";
}

const TypeKernels& kernels_for(GgmlType t) {
  const uint32_t id = static_cast<uint32_t>(t);
  if (id >= kGgmlTypeCount ||
      (!tables().best[id].vec_dot && !tables().best[id].dequantize && !tables().best[id].quantize))
    throw Error("unsupported tensor type " + ggml_type_id_name(id));
  return tables().best[id];
}

const TypeKernels* kernels_for(GgmlType t, Isa isa) {
  const uint32_t id = static_cast<uint32_t>(t);
  if (id >= kGgmlTypeCount || !isa_available(isa)) return nullptr;
  const TypeKernels& k = tables().per_isa[static_cast<int>(isa)].quant[id];
  if (!k.dequantize && !k.quantize && !k.vec_dot && !k.vec_dot_cols && !k.gemm_tile && !k.packed_dot) return nullptr;
  return &k;
}

bool is_supported(GgmlType t) {
  const uint32_t id = static_cast<uint32_t>(t);
  return id < kGgmlTypeCount && tables().best[id].vec_dot && tables().best[id].dequantize;
}

Isa best_isa() { return tables().best_isa; }

const OpsKernels& ops() { return tables().best_ops; }

const OpsKernels* ops_for(Isa isa) {
  if (!isa_available(isa)) return nullptr;
  const OpsKernels& k = tables().per_isa[static_cast<int>(isa)].ops;
  return has_any_op(k) ? &k : nullptr;
}

void dot_cols(const TypeKernels& k, int64_t n, const void* w, const void* const* act, int n_act, float* out) {
  if (k.vec_dot_cols) {
    for (int j = 0; j < n_act; j += kMaxDotCols)
      k.vec_dot_cols(n, w, act + j, n_act - j < kMaxDotCols ? n_act - j : kMaxDotCols, out + j);
  } else {
    for (int j = 0; j < n_act; ++j) out[j] = k.vec_dot(n, w, act[j]);
  }
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  kernels_for(t).dequantize(src, dst, n);
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const TypeKernels& k = kernels_for(t);
  if (!k.quantize) throw Error("cannot write tensors of type " + std::string(ggml_type_name(t)));
  k.quantize(src, dst, n);
}

}  // namespace sluice::kernels
