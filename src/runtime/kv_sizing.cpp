#include "runtime/kv_sizing.h"

#include "kv/kv_geometry.h"

namespace frugal::runtime {

DType engine_kv_dtype(const ops::Backend& backend) { return backend.activation_dtype(); }

kv::KvGeometry engine_kv_geometry(const model::ModelConfig& config, DType kv_dtype, int32_t block_size) {
  return kv::kv_geometry(config, {.tensor_parallel = 1}, {.dtype = kv_dtype, .block_size = block_size});
}

}  // namespace frugal::runtime
