#include "model/taps.h"

namespace frugal::model {

Status Taps::record(const std::string& name, const void* data, int64_t rows, int64_t width, int64_t ld) {
  return record(name, data, rows, width, ld, backend_->activation_dtype());
}

Status Taps::record(const std::string& name, const void* data, int64_t rows, int64_t width, int64_t ld, DType act) {
  const int64_t row_bytes = dtype_bytes(act, ld);
  staging_.resize(static_cast<size_t>(row_bytes * rows));
  FRUGAL_RETURN_IF_ERROR(backend_->download(staging_.data(), data, staging_.size()));
  auto& out = taps_[name];
  out.resize(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r)
    convert_to_f32(act, staging_.data() + r * row_bytes, out.data() + r * width, width);
  return {};
}

const std::vector<float>* Taps::get(const std::string& name) const {
  auto it = taps_.find(name);
  return it == taps_.end() ? nullptr : &it->second;
}

}  // namespace frugal::model
