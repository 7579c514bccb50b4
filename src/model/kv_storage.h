// Device storage of the paged KV cache: one arena laid out by kv/kv_layout.h for the geometry
// kv/kv_geometry.h derives from the config, per layer K and V [n_blocks, block_size, n_head_kv,
// head_dim]. Storage only: which blocks belong to which sequence is the block pool's business
// (src/kv), passed to forward() as block tables.
#pragma once

#include <memory>
#include <optional>

#include "core/status.h"
#include "kv/kv_layout.h"
#include "model/config.h"
#include "ops/backend.h"

namespace frugal::model {

struct KvStorageConfig {
  int32_t n_blocks = 0;
  int32_t block_size = 16;
  std::optional<DType> dtype = std::nullopt;  // default: the backend's activation dtype
};

class KvStorage {
 public:
  // kv::kv_geometry(config) for one rank, in kv.dtype (default: the backend's activation dtype).
  static Result<std::unique_ptr<KvStorage>> create(ops::Backend* backend, const ModelConfig& config,
                                                   const KvStorageConfig& kv);
  // An arena of n_blocks blocks of geometry g (its dtype and block_size included). MLA: one
  // latent row per token, handed to the kernels as one KV head that is both K and V (layer()).
  static Result<std::unique_ptr<KvStorage>> create(ops::Backend* backend, const kv::KvGeometry& g,
                                                   int32_t n_blocks);
  ops::KvCacheLayer layer(int32_t i) const;
  int32_t n_layers() const { return layout_.geometry.n_layers; }
  int32_t n_blocks() const { return layout_.n_blocks; }
  int32_t block_size() const { return layout_.geometry.block_size; }
  int64_t bytes() const { return layout_.total_bytes; }
  const kv::KvArenaLayout& layout() const { return layout_; }

 private:
  KvStorage() = default;
  kv::KvArenaLayout layout_;
  ops::DeviceBuffer arena_;
};

}  // namespace frugal::model
