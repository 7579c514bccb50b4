#include "model/kv_storage.h"

#include "kv/kv_geometry.h"

namespace frugal::model {

Result<std::unique_ptr<KvStorage>> KvStorage::create(ops::Backend* backend, const ModelConfig& config,
                                                     const KvStorageConfig& kv) {
  const kv::KvGeometry g = kv::kv_geometry(config, {.tensor_parallel = 1},
                                           {.dtype = kv.dtype.value_or(backend->activation_dtype()),
                                            .block_size = kv.block_size});
  return create(backend, g, kv.n_blocks);
}

Result<std::unique_ptr<KvStorage>> KvStorage::create(ops::Backend* backend, const kv::KvGeometry& g,
                                                     int32_t n_blocks) {
  if (g.kind == kv::KvKind::kMla && kv::has_scale_tensors(g.dtype))
    return unsupported("kv storage: MLA latent caches with per-token scales (int8) are not supported yet");
  if (n_blocks <= 0) return invalid_argument("kv storage: n_blocks must be positive, got " + std::to_string(n_blocks));
  auto s = std::unique_ptr<KvStorage>(new KvStorage());
  FRUGAL_ASSIGN_OR_RETURN(s->layout_, kv::make_arena_layout(g, n_blocks));
  FRUGAL_ASSIGN_OR_RETURN(s->arena_, ops::DeviceBuffer::create(backend, static_cast<size_t>(s->layout_.total_bytes)));
  // Zeroed so a stray read of an unwritten slot is finite, never NaN garbage.
  FRUGAL_RETURN_IF_ERROR(backend->memset_zero(s->arena_.data(), s->arena_.size()));
  return s;
}

ops::KvCacheLayer KvStorage::layer(int32_t i) const {
  const auto& g = layout_.geometry;
  auto* base = arena_.as<uint8_t>();
  if (g.kind == kv::KvKind::kMla) {
    // One latent row [kv_lora_rank ++ k_pe] per token, seen by the kernels as a single KV head
    // that is both K and V (attention in the latent space, model/deepseek.cpp).
    void* latent = base + kv::tensor_offset(layout_, i, kv::KvTensor::kLatent);
    return ops::KvCacheLayer{.k_cache = latent, .v_cache = latent, .cache_dtype = g.dtype,
                             .n_blocks = layout_.n_blocks, .block_size = g.block_size, .n_head_kv = 1,
                             .head_dim = g.latent_dim + g.rope_dim};
  }
  const bool scales = kv::has_scale_tensors(g.dtype);
  auto scale_ptr = [&](kv::KvTensor t) {
    return scales ? reinterpret_cast<float*>(base + kv::tensor_offset(layout_, i, t)) : nullptr;
  };
  return ops::KvCacheLayer{.k_cache = base + kv::tensor_offset(layout_, i, kv::KvTensor::kK),
                           .v_cache = base + kv::tensor_offset(layout_, i, kv::KvTensor::kV),
                           .cache_dtype = g.dtype,
                           .n_blocks = layout_.n_blocks,
                           .block_size = g.block_size,
                           .n_head_kv = g.n_head_kv,
                           .head_dim = g.head_dim_k,
                           .k_scales = scale_ptr(kv::KvTensor::kKScale),
                           .v_scales = scale_ptr(kv::KvTensor::kVScale)};
}

}  // namespace frugal::model
