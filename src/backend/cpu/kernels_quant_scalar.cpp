// The scalar instantiation of the quantized-matmul kernels (see kernels_quant_impl.h).
#include "backend/cpu/simd_scalar.h"

#define FRUGAL_CPU_ISA scalar
#define FRUGAL_CPU_ISA_NAME "scalar"
#define FRUGAL_QUANT_ISA_BITS 0
#include "backend/cpu/kernels_quant_impl.h"

namespace frugal::cpu {
const QuantKernelTable& scalar_quant_kernels() { return scalar::quantk::table(); }
}  // namespace frugal::cpu
