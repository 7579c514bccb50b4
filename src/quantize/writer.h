// Writes a HF-style sharded safetensors checkpoint: model-0000i-of-0000N.safetensors (or one
// model.safetensors) plus model.safetensors.index.json. Tensors are buffered until a shard is
// full, so memory stays at about one shard; shard names are fixed once N is known (finish).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "quantize/packing.h"

namespace frugal::quantize {

class ShardedWriter {
 public:
  ShardedWriter(std::string dir, int64_t max_shard_bytes) : dir_(std::move(dir)), max_shard_bytes_(max_shard_bytes) {}
  // `t.name` is the full tensor name. Duplicate names are an error.
  Status add(OutTensor t);
  // Flushes the last shard, renames the shards and writes the index (when sharded).
  Status finish();
  int64_t total_bytes() const { return total_bytes_; }

 private:
  Status flush();

  std::string dir_;
  int64_t max_shard_bytes_;
  std::vector<OutTensor> pending_;
  int64_t pending_bytes_ = 0;
  int64_t total_bytes_ = 0;
  std::vector<std::vector<std::string>> shard_names_;  // tensor names per written shard
};

}  // namespace frugal::quantize
