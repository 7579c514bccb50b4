// The slab GEMM's kernels for int8 codes, symmetric (quant_gemm_slab.cuh).
#include "backend/cuda/quant_gemm_slab.cuh"

namespace frugal::cuda::slab {
template cudaError_t run_mt<QKind::kInt8, false>(Op op, const OpArgs& o, const SlabShape& s);
}  // namespace frugal::cuda::slab
