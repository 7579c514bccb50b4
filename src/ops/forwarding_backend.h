// A Backend that forwards everything to another one (generated from ops/op_list.h). Derive from
// it to change one behaviour of a real backend: weight placement in a test, a refusal in the
// harness's self-test, tracing.
#pragma once

#include <memory>
#include <utility>

#include "ops/backend.h"

namespace frugal::ops {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  Result<void*> alloc(size_t n) override { return inner_->alloc(n); }
  void free(void* p) override { inner_->free(p); }
  Status upload(void* d, const void* s, size_t n) override { return inner_->upload(d, s, n); }
  Status download(void* d, const void* s, size_t n) override { return inner_->download(d, s, n); }
  Status memset_zero(void* d, size_t n) override { return inner_->memset_zero(d, n); }
  Status synchronize() override { return inner_->synchronize(); }
  bool weights_in_host_memory() const override { return inner_->weights_in_host_memory(); }
  Status device_memory(size_t* free_bytes, size_t* total_bytes) override {
    return inner_->device_memory(free_bytes, total_bytes);
  }
  Result<WeightFormat> prepare_weight(const WeightView& w, int64_t n, int64_t k) override {
    return inner_->prepare_weight(w, n, k);
  }

#define FRUGAL_FORWARD_OP_(Name, method) \
  Status method(const Name##Params& p) override { return inner_->method(p); }
  FRUGAL_OPS(FRUGAL_FORWARD_OP_)
#define FRUGAL_FORWARD_OPTIONAL_OP_(Name, method)                                  \
  bool supports_##method() const override { return inner_->supports_##method(); } \
  Status method(const Name##Params& p) override { return inner_->method(p); }
  FRUGAL_OPTIONAL_OPS(FRUGAL_FORWARD_OPTIONAL_OP_)
#undef FRUGAL_FORWARD_OPTIONAL_OP_
  // Fused ops go to the inner backend whole, so that its fused kernels run.
  FRUGAL_FUSED_OPS(FRUGAL_FORWARD_OP_)
#undef FRUGAL_FORWARD_OP_
  // Graphs are not forwarded: a capture records the inner backend's kernels, not this one's.

  Backend* inner() const { return inner_.get(); }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace frugal::ops
