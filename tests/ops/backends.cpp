#include "backends.h"

#include "backend/cpu/cpu_backend.h"
#include "ops/ref_backend.h"
#ifdef FRUGAL_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace frugal::testing {

Result<std::unique_ptr<ops::Backend>> make_backend_by_name(const std::string& name) {
  if (name == "ref") return ops::make_ref_backend();
  if (name == "cpu") return make_cpu_backend();
#ifdef FRUGAL_WITH_CUDA
  if (name == "cuda") return make_cuda_backend(0);
  if (name == "cuda_fused") {  // every fused kernel on, those off by default until measured too
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b, cuda::CudaBackend::create(0));
    b->set_fuse_rope_kv(true);
    b->set_fuse_silu_mul(true);
    b->set_fuse_silu_quant(true);
    b->set_fuse_mla_prologue(true);
    b->set_fuse_route(true);
    b->set_fuse_norm(true);
    return std::unique_ptr<ops::Backend>(std::move(b));
  }
  if (name == "cuda_slab") {  // every quantized matmul the GEMVs take at any m through the slab GEMM
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b, cuda::CudaBackend::create(0));
    b->set_quant_gemm(cuda::QuantGemmKernel::kSlab, 1);
    return std::unique_ptr<ops::Backend>(std::move(b));
  }
  if (name == "cuda_bulk") {  // the quantized matmuls of m <= 8 through the bulk (TMA) GEMV, opt-in
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b, cuda::CudaBackend::create(0));
    b->set_quant_gemv(cuda::QuantGemvKernel::kBulk);
    return std::unique_ptr<ops::Backend>(std::move(b));
  }
  // The quantized matmuls of m <= 8 through the tile GEMV (the default is the lean one), and
  // moe_router through the grid kernel whose last block routes (route mode 3; cuda_fused runs
  // the cluster kernel).
  if (name == "cuda_tile") {
    FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaBackend> b, cuda::CudaBackend::create(0));
    b->set_quant_gemv(cuda::QuantGemvKernel::kTile);
    b->set_route_mode(3);
    return std::unique_ptr<ops::Backend>(std::move(b));
  }
#endif
  return not_found("backend '" + name + "' is not built in (known: ref, cpu" +
#ifdef FRUGAL_WITH_CUDA
                   std::string(", cuda, cuda_fused, cuda_slab, cuda_bulk, cuda_tile") +
#else
                   std::string() +
#endif
                   ")");
}

}  // namespace frugal::testing
