#include "runtime/kv_sizing.h"

#include "kv/kv_geometry.h"

namespace frugal::runtime {

DType engine_kv_dtype(const ops::Backend& backend) { return backend.activation_dtype(); }

Result<DType> engine_kv_dtype(const ops::Backend& backend, const std::string& kv_cache_dtype) {
  if (kv_cache_dtype == "auto") return engine_kv_dtype(backend);
  FRUGAL_ASSIGN_OR_RETURN(DType d, kv::parse_kv_dtype(kv_cache_dtype));
  const std::string name = backend.name();
  if ((d == DType::kF8E4M3 || d == DType::kI8) && name.rfind("cuda", 0) == 0)
    return unsupported("kv_cache_dtype " + kv_cache_dtype + ": the " + name +
                       " backend has no fp8 / int8 KV cache kernels yet (use bf16 or auto)");
  return d;
}

kv::KvGeometry engine_kv_geometry(const model::ModelConfig& config, DType kv_dtype, int32_t block_size) {
  return kv::kv_geometry(config, {.tensor_parallel = 1}, {.dtype = kv_dtype, .block_size = block_size});
}

}  // namespace frugal::runtime
