// The scalar reference set (kernel_table.h): every supported type, every op.
#include "kernels/kernel_table.h"
#include "kernels/legacy_impl.h"

namespace sluice::kernels {

void fill_isa_scalar(IsaKernels& k) {
  fill_legacy_scalar(k.quant);
  fill_kquant_scalar(k.quant);
  fill_ops_scalar(k.ops);
  fill_deltanet_scalar(k.ops);
}

}  // namespace sluice::kernels
