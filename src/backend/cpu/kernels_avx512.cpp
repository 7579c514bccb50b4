// The avx512 instantiation of the generic CPU kernels (see kernels_impl.h).
#include "backend/cpu/simd_avx512.h"

#define FRUGAL_CPU_ISA avx512
#define FRUGAL_CPU_ISA_NAME "avx512"
#include "backend/cpu/kernels_impl.h"

namespace frugal::cpu {
const KernelTable& avx512_kernels() { return avx512::table(); }
}  // namespace frugal::cpu
