// The avx2 instantiation of the generic CPU kernels (see kernels_impl.h).
#include "backend/cpu/simd_avx2.h"

#define FRUGAL_CPU_ISA avx2
#define FRUGAL_CPU_ISA_NAME "avx2"
#include "backend/cpu/kernels_impl.h"

namespace frugal::cpu {
const KernelTable& avx2_kernels() { return avx2::table(); }
}  // namespace frugal::cpu
