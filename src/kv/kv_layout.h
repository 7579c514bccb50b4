// kv_layout: the one place that turns (layer, block, slot) into bytes of the KV arena and
// computes KV sizes. The planner sizes pools with it; the engine carves the device arena with it;
// kernels get the resulting base pointers through ops::KvCacheLayer. See docs/kv_cache.md.
//
// Arena (one allocation, layer-major; every tensor region starts on a kKvAlignment boundary):
//   for layer in [0, n_layers):
//     GQA:  K        [n_blocks, block_size, n_head_kv, head_dim_k]  dtype
//           V        [n_blocks, block_size, n_head_kv, head_dim_v]  dtype
//           K scales [n_blocks, block_size, n_head_kv]              f32   (int8 only)
//           V scales [n_blocks, block_size, n_head_kv]              f32   (int8 only)
//     MLA:  latent   [n_blocks, block_size, latent_dim + rope_dim]  dtype (kv_lora_rank ++ k_pe)
//           scales   [n_blocks, block_size]                         f32   (int8 only)
// K and V match ops::KvCacheLayer exactly (slot = block * block_size + offset), so a kernel that
// reads one layer's K needs only tensor_offset(layer, kK) added to the arena base.
//
// Scales: int8 is symmetric per (token, kv head) for GQA and per token for MLA, one f32 each,
// stored in the scale tensors above and counted in every per-token size. fp8 e4m3 uses per-layer
// scalar scales (k_scale, v_scale) passed as kernel parameters like vLLM's, so it adds no bytes
// per token. bf16, f16 and f32 have no scales.
#pragma once

#include <array>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace frugal::kv {

enum class KvKind : uint8_t {
  kGqa,  // separate K and V heads (MHA is GQA with n_head_kv == n_head)
  kMla,  // DeepSeek MLA: one compressed latent (plus the shared rope key) per token
};

// Tensors of one layer, in arena order. Tensors a geometry does not have take no bytes.
enum class KvTensor : uint8_t { kK, kV, kKScale, kVScale, kLatent, kLatentScale };
inline constexpr int kNumKvTensors = 6;

// Bytes every tensor region is aligned to inside the arena (covers 128-byte TMA/vector loads).
inline constexpr int64_t kKvAlignment = 256;

// Shape of the KV cache of one model on one rank (with tensor parallelism, n_head_kv is the
// rank's share; MLA latents are replicated). Fields of the other kind are ignored.
struct KvGeometry {
  int32_t n_layers = 0;
  KvKind kind = KvKind::kGqa;
  int32_t n_head_kv = 0;   // GQA
  int32_t head_dim_k = 0;  // GQA
  int32_t head_dim_v = 0;  // GQA; 0 means head_dim_k
  int32_t latent_dim = 0;  // MLA: kv_lora_rank
  int32_t rope_dim = 0;    // MLA: qk_rope_head_dim
  DType dtype = DType::kBF16;  // bf16, f16, f32, fp8 e4m3 or int8
  int32_t block_size = 16;     // tokens per block
};

// Checks that the geometry is complete and its dtype is a supported KV dtype; the message names
// the offending field.
Status validate(const KvGeometry& g);

// True when the KV dtype carries per-token scale tensors in the arena (int8).
bool has_scale_tensors(DType dtype);

// Bytes of one token's row in tensor t (0 when the geometry has no such tensor).
int64_t slot_bytes(const KvGeometry& g, KvTensor t);
// Bytes of one token in one layer, scales included.
int64_t bytes_per_token_per_layer(const KvGeometry& g);
// Bytes of one token over all layers, scales included.
int64_t bytes_per_token(const KvGeometry& g);
// Bytes of one block over all layers (block_size tokens), alignment padding excluded.
int64_t bytes_per_block(const KvGeometry& g);

// Byte offsets inside an arena of n_blocks blocks.
struct KvArenaLayout {
  KvGeometry geometry;
  int32_t n_blocks = 0;
  int64_t layer_stride = 0;  // bytes from layer l to layer l + 1
  std::array<int64_t, kNumKvTensors> tensor_offset{};  // within a layer; -1 if absent
  int64_t total_bytes = 0;
};

// Validates g and lays out an arena of n_blocks blocks (n_blocks >= 1).
Result<KvArenaLayout> make_arena_layout(const KvGeometry& g, int32_t n_blocks);
// Total arena bytes for n_blocks blocks, alignment padding included (g must be valid).
int64_t arena_bytes(const KvGeometry& g, int32_t n_blocks);
// The largest n_blocks whose arena_bytes fits in budget_bytes (0 if not even one block fits).
int32_t n_blocks_for_budget(const KvGeometry& g, int64_t budget_bytes);

// Offset of tensor t of `layer` from the arena base (the tensor's [0, 0, ...] element).
// Checks that the tensor exists and layer is in range.
int64_t tensor_offset(const KvArenaLayout& a, int32_t layer, KvTensor t);
// Offset of token `slot` (0 <= slot < block_size) of `block` in tensor t of `layer`.
int64_t slot_offset(const KvArenaLayout& a, int32_t layer, KvTensor t, int32_t block, int32_t slot);

}  // namespace frugal::kv
