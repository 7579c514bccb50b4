#include "ops/backend.h"

namespace frugal::ops {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kMatmul: return "matmul";
    case OpKind::kRope: return "rope";
    case OpKind::kKvWrite: return "kv_write";
    case OpKind::kAttention: return "attention";
    case OpKind::kSiluMul: return "silu_mul";
    case OpKind::kGatherRows: return "gather_rows";
  }
  return "?";
}

Result<DeviceBuffer> DeviceBuffer::create(Backend* backend, size_t nbytes) {
  DeviceBuffer b;
  FRUGAL_ASSIGN_OR_RETURN(b.ptr_, backend->alloc(nbytes));
  b.backend_ = backend;
  b.size_ = nbytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : backend_(o.backend_), ptr_(o.ptr_), size_(o.size_) {
  o.ptr_ = nullptr;
  o.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) backend_->free(ptr_);
    backend_ = o.backend_;
    ptr_ = o.ptr_;
    size_ = o.size_;
    o.ptr_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) backend_->free(ptr_);
}

}  // namespace frugal::ops
