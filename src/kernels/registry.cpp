#include <string>

#include "kernels/kernel_table.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace sluice::kernels {
namespace {

bool isa_available(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return f.avx2 && f.fma && f.f16c;
    case Isa::Neon: return false;  // slot kept: no NEON kernels yet
    case Isa::AvxVnni: return f.avx2 && f.fma && f.f16c && f.avxvnni;
    case Isa::Avx512Vnni: return f.avx2 && f.fma && f.f16c && f.avx512vnni;
    case Isa::Amx: return f.avx2 && f.fma && f.f16c && f.avx512vnni && f.amx_int8;
  }
  return false;
}

struct Tables {
  std::array<KernelTable, kIsaCount> per_isa{};
  KernelTable best{};
  Isa best_isa = Isa::Scalar;
};

const Tables& tables() {
  static const Tables t = [] {
    Tables t;
    for (int i = 0; i < kIsaCount; ++i) {
      const Isa isa = static_cast<Isa>(i);
      if (!isa_available(isa)) continue;
      fill_legacy_kernels(t.per_isa[i], isa);
      fill_kquant_kernels(t.per_isa[i], isa);
      fill_dot_cols_kernels(t.per_isa[i], isa);
      fill_amx_kernels(t.per_isa[i], isa);
    }
    t.best = t.per_isa[0];
    for (int i = 1; i < kIsaCount; ++i) {
      if (!isa_available(static_cast<Isa>(i))) continue;
      for (uint32_t ty = 0; ty < kGgmlTypeCount; ++ty) {
        const TypeKernels& k = t.per_isa[i][ty];
        if (k.dequantize) t.best[ty].dequantize = k.dequantize;
        if (k.quantize) t.best[ty].quantize = k.quantize;
        if (k.vec_dot) {
          t.best[ty].vec_dot = k.vec_dot;
          // The multi-column dot must come from the same ISA as vec_dot (it is
          // bit-identical only to its own ISA's vec_dot); none there -> none.
          t.best[ty].vec_dot_cols = k.vec_dot_cols;
          t.best[ty].prepare_tile = k.prepare_tile;
          t.best[ty].gemm_tile = k.gemm_tile;
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
  const TypeKernels& k = tables().per_isa[static_cast<int>(isa)][id];
  if (!k.dequantize && !k.quantize && !k.vec_dot && !k.vec_dot_cols && !k.gemm_tile) return nullptr;
  return &k;
}

bool is_supported(GgmlType t) {
  const uint32_t id = static_cast<uint32_t>(t);
  return id < kGgmlTypeCount && tables().best[id].vec_dot && tables().best[id].dequantize;
}

Isa best_isa() { return tables().best_isa; }

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
