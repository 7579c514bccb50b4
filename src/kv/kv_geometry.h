// ModelConfig -> kv::KvGeometry: the one place that knows the KV cache shape of a model on one
// tensor-parallel rank. The engine sizes and carves its pool with it, model::KvStorage lays its
// arena out with it, the planner predicts with it and the bench judges the engine with it; all
// of them then count bytes through kv_layout (bytes_per_token, n_blocks_for_budget, arena_bytes).
//
//   GQA (Llama, Qwen2; MHA is n_head_kv == n_head): per token per layer one K and one V row of
//       n_head_kv x head_dim. With tensor parallelism the KV heads are split over the ranks,
//       ceil(n_head_kv / tp) per rank, replicated (one head per rank) when tp > n_head_kv.
//   MLA (DeepSeek-V2/V3): per token per layer one latent row of kv_lora_rank + qk_rope_head_dim
//       (the compressed KV and the shared rope key), replicated on every rank.
//
// KV dtypes: KvCacheOptions.dtype is the cache's element type. The engine stores its activation
// dtype (bf16 on CUDA, f32 on the CPU); fp8 e4m3 (per-layer scalar scales) and int8 (per-token
// scale tensors in the arena) are already laid out and counted by kv_layout, so a new KV
// precision changes kv_layout and the kernels, not this function. See docs/kv_cache.md.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/parallelism.h"
#include "core/status.h"
#include "kv/kv_layout.h"
#include "model/config.h"

namespace frugal::kv {

struct KvCacheOptions {
  DType dtype = DType::kBF16;  // bf16, f16, f32, f8_e4m3 or i8 (kv_layout's KV dtypes)
  int32_t block_size = 16;     // tokens per block
};

// The KV geometry of one rank. p.tensor_parallel must be >= 1 (callers validate their flags).
KvGeometry kv_geometry(const model::ModelConfig& c, const Parallelism& p, const KvCacheOptions& o);

// KV dtype names users type (`--kv-dtype`): "bf16" | "fp8" | "int8". The error names the value
// and the accepted names; callers add the flag.
Result<DType> parse_kv_dtype(const std::string& s);
// "bf16", "fp8", "int8", else dtype_name().
const char* kv_dtype_label(DType d);

}  // namespace frugal::kv
