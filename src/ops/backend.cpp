#include "ops/backend.h"

namespace frugal::ops {

const char* op_kind_name(OpKind k) {
  switch (k) {
#define FRUGAL_OP_NAME_(Name, method) \
  case OpKind::k##Name: return #method;
    FRUGAL_ALL_OPS(FRUGAL_OP_NAME_)
#undef FRUGAL_OP_NAME_
  }
  return "?";
}

bool op_is_required(OpKind k) {
  switch (k) {
#define FRUGAL_OP_REQUIRED_(Name, method) \
  case OpKind::k##Name: return true;
    FRUGAL_OPS(FRUGAL_OP_REQUIRED_)
#define FRUGAL_OP_OPTIONAL_(Name, method) \
  case OpKind::k##Name: return false;
    FRUGAL_OPTIONAL_OPS(FRUGAL_OP_OPTIONAL_)
#undef FRUGAL_OP_OPTIONAL_
    FRUGAL_FUSED_OPS(FRUGAL_OP_REQUIRED_)
#undef FRUGAL_OP_REQUIRED_
  }
  return false;
}

// The fused ops' defaults: their sequences (ops/params.h).
Status Backend::rope_kv_write(const RopeKvWriteParams& p) {
  FRUGAL_RETURN_IF_ERROR(rope(p.rope));
  return kv_write(p.kv);
}

Status Backend::matmul_silu_mul(const MatmulSiluMulParams& p) {
  FRUGAL_RETURN_IF_ERROR(matmul(p.mm));
  return silu_mul(p.act);
}

Status Backend::silu_mul_matmul(const SiluMulMatmulParams& p) {
  FRUGAL_RETURN_IF_ERROR(silu_mul(p.act));
  return matmul(p.mm);
}

Status Backend::mla_kv_prologue(const MlaKvPrologueParams& p) {
  FRUGAL_RETURN_IF_ERROR(rms_norm(p.norm));
  FRUGAL_RETURN_IF_ERROR(rope(p.rope));
  return kv_write(p.kv);
}

Status Backend::attention_batched_matmul(const AttentionBatchedMatmulParams& p) {
  FRUGAL_RETURN_IF_ERROR(attention(p.attn));
  return batched_matmul(p.mm);
}

Status Backend::mla_attention(const MlaAttentionParams& p) {
  FRUGAL_RETURN_IF_ERROR(rms_norm_matmul(p.qkv));
  FRUGAL_RETURN_IF_ERROR(mla_kv_prologue(p.prologue));
  FRUGAL_RETURN_IF_ERROR(batched_matmul(p.absorb));
  FRUGAL_RETURN_IF_ERROR(attention_batched_matmul(p.attn));
  return matmul(p.o);
}

Status Backend::moe_router(const MoeRouterParams& p) {
  FRUGAL_RETURN_IF_ERROR(rms_norm(p.norm));
  FRUGAL_RETURN_IF_ERROR(matmul(p.mm));
  return moe_route(p.route);
}

Status Backend::moe_block(const MoeBlockParams& p) {
  FRUGAL_RETURN_IF_ERROR(moe_router(p.router));
  return moe_experts(p.experts);
}

Status Backend::rms_norm_matmul(const RmsNormMatmulParams& p) {
  FRUGAL_RETURN_IF_ERROR(rms_norm(p.norm));
  return matmul(p.mm);
}

Status Backend::matmul_rope_kv_write(const MatmulRopeKvWriteParams& p) {
  FRUGAL_RETURN_IF_ERROR(matmul(p.mm));
  return rope_kv_write(p.rkv);
}

Status Backend::matmul_rms_norm(const MatmulRmsNormParams& p) {
  FRUGAL_RETURN_IF_ERROR(matmul(p.mm));
  return rms_norm(p.norm);
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
