// Picks the element-wise op implementations once per process.
#include "kernels/ops_impl.h"
#include "util/cpu_features.h"

namespace sluice::kernels {
namespace {

struct OpsTables {
  OpsKernels scalar;
  OpsKernels avx2;
  bool has_avx2 = false;
  OpsKernels best;
};

// Replaces the entries of `dst` that `src` has.
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
}

const OpsTables& tables() {
  static const OpsTables t = [] {
    OpsTables t;
    fill_ops_scalar(t.scalar);
    t.best = t.scalar;
#if defined(__x86_64__)
    const CpuFeatures& f = cpu_features();
    if (f.avx2 && f.fma && f.f16c) {
      fill_ops_avx2(t.avx2);
      t.has_avx2 = true;
      overlay(t.best, t.avx2);
    }
#endif
    return t;
  }();
  return t;
}

}  // namespace

const OpsKernels& ops() { return tables().best; }

const OpsKernels* ops_for(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return &tables().scalar;
    case Isa::Avx2: return tables().has_avx2 ? &tables().avx2 : nullptr;
    case Isa::Neon: return nullptr;
    case Isa::AvxVnni: return nullptr;  // no integer dots among the ops: AVX2 serves
    case Isa::Avx512Vnni: return nullptr;
    case Isa::Amx: return nullptr;
  }
  return nullptr;
}

}  // namespace sluice::kernels
