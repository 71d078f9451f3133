// STUB — replaced by the K-quant implementation.
#include "kernels/kernel_table.h"
namespace sluice::kernels {
void fill_kquant_kernels(KernelTable&, Isa) {}
}  // namespace sluice::kernels
