// The avx2 instantiation of the quantized-matmul kernels (see kernels_quant_impl.h).
#include "backend/cpu/simd_avx2.h"

#define FRUGAL_CPU_ISA avx2
#define FRUGAL_CPU_ISA_NAME "avx2"
#define FRUGAL_QUANT_ISA_BITS 256
#include "backend/cpu/kernels_quant_impl.h"

namespace frugal::cpu {
const QuantKernelTable& avx2_quant_kernels() { return avx2::quantk::table(); }
}  // namespace frugal::cpu
