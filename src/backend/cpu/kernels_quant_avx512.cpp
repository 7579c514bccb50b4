// The avx512 instantiation of the quantized-matmul kernels (see kernels_quant_impl.h).
#include "backend/cpu/simd_avx512.h"

#define FRUGAL_CPU_ISA avx512
#define FRUGAL_CPU_ISA_NAME "avx512"
#define FRUGAL_QUANT_ISA_BITS 512
#include "backend/cpu/kernels_quant_impl.h"

namespace frugal::cpu {
const QuantKernelTable& avx512_quant_kernels() { return avx512::quantk::table(); }
const QuantKernelTable& avx512_vnni_quant_kernels() { return avx512::quantk::table_vnni(); }
}  // namespace frugal::cpu
