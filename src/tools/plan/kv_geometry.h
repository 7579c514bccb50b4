// ModelConfig -> kv::KvGeometry: the KV cache shape of one tensor-parallel rank. The planner and
// the engine size KV with the same kv::bytes_per_token / n_blocks_for_budget on this geometry.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "kv/kv_layout.h"
#include "model/config.h"

namespace frugal::tools {

// GQA: each rank holds ceil(n_head_kv / tp) KV heads (heads are replicated when tp > n_head_kv).
// MLA: the latent (kv_lora_rank + qk_rope_head_dim per token) is replicated on every rank.
kv::KvGeometry kv_geometry(const model::ModelConfig& c, DType kv_dtype, int tp, int block_size);

// "bf16" | "fp8" | "int8" -> DType; errors name --kv-dtype.
Result<DType> parse_kv_dtype(const std::string& s);
const char* kv_dtype_label(DType d);

}  // namespace frugal::tools
