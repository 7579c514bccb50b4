#include "runtime/kv_sizing.h"

#include "kv/kv_geometry.h"

namespace frugal::runtime {

DType engine_kv_dtype(const ops::Backend& backend) { return backend.activation_dtype(); }

Result<DType> engine_kv_dtype(const ops::Backend& backend, const std::string& kv_cache_dtype) {
  if (kv_cache_dtype == "auto") return engine_kv_dtype(backend);
  FRUGAL_ASSIGN_OR_RETURN(DType d, kv::parse_kv_dtype(kv_cache_dtype));
  (void)backend;  // every backend stores bf16, fp8 and int8 caches (the reference, CPU, CUDA)
  return d;
}

kv::KvGeometry engine_kv_geometry(const model::ModelConfig& config, DType kv_dtype, int32_t block_size) {
  return kv::kv_geometry(config, {.tensor_parallel = 1}, {.dtype = kv_dtype, .block_size = block_size});
}

}  // namespace frugal::runtime
