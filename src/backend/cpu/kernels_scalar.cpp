// The scalar instantiation of the generic CPU kernels (see kernels_impl.h).
#include "backend/cpu/simd_scalar.h"

#define FRUGAL_CPU_ISA scalar
#define FRUGAL_CPU_ISA_NAME "scalar"
#include "backend/cpu/kernels_impl.h"

namespace frugal::cpu {
const KernelTable& scalar_kernels() { return scalar::table(); }
}  // namespace frugal::cpu
