// Named debug taps: after a forward with taps enabled, intermediates the family recorded are
// on the host as f32 [n_tokens, width] under names like "blk.3.attn_out" (docs/model.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "ops/backend.h"

namespace frugal::model {

class Taps {
 public:
  explicit Taps(ops::Backend* backend) : backend_(backend) {}
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }
  // Copies device rows [rows, width] (leading dimension ld, the backend's activation dtype)
  // into tap `name` (synchronously: steps with taps never run as graphs).
  Status record(const std::string& name, const void* data, int64_t rows, int64_t width, int64_t ld);
  // The same for data stored in `dtype` (e.g. f32 router logits next to bf16 activations).
  Status record(const std::string& name, const void* data, int64_t rows, int64_t width, int64_t ld, DType dtype);
  // A tap of the last forward; nullptr if not recorded.
  const std::vector<float>* get(const std::string& name) const;

 private:
  ops::Backend* backend_;
  bool enabled_ = false;
  std::map<std::string, std::vector<float>> taps_;
  std::vector<uint8_t> staging_;
};

}  // namespace frugal::model
