// What the engine sizes its KV pool with: the accounting half of EngineImpl::init, a function of
// the config so tests and tools can ask "what would the engine allocate" without a device.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "kv/kv_layout.h"
#include "model/config.h"
#include "ops/backend.h"

namespace frugal::runtime {

// The KV dtype the engine stores: the backend's activation dtype (bf16 on CUDA, f32 on the CPU).
DType engine_kv_dtype(const ops::Backend& backend);
// The KV dtype for EngineOptions::kv_cache_dtype: "auto" is engine_kv_dtype(backend); otherwise
// a name kv::parse_kv_dtype knows (bf16, fp8, int8); the error names an unknown value. Every
// backend (reference, CPU, CUDA) stores all three.
Result<DType> engine_kv_dtype(const ops::Backend& backend, const std::string& kv_cache_dtype);

// The geometry of the engine's pool (kv::kv_geometry for one rank: the engine has no tensor
// parallelism yet). model::KvStorage lays out exactly this geometry.
kv::KvGeometry engine_kv_geometry(const model::ModelConfig& config, DType kv_dtype, int32_t block_size);

}  // namespace frugal::runtime
