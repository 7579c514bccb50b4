// The slab GEMM's kernels for int4 codes without zero-point offsets (quant_gemm_slab.cuh).
#include "backend/cuda/quant_gemm_slab.cuh"

namespace frugal::cuda::slab {
template cudaError_t run_mt<QKind::kInt4, false>(Op op, const OpArgs& o, const SlabShape& s);
}  // namespace frugal::cuda::slab
