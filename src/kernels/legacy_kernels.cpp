// STUB — replaced by the legacy-formats implementation.
#include "kernels/kernel_table.h"
namespace sluice::kernels {
void fill_legacy_kernels(KernelTable&, Isa) {}
}  // namespace sluice::kernels
