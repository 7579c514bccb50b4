#include "ops/ref_backend.h"

#include <cstdlib>
#include <cstring>

#include "ops/reference.h"
#include "ops/weight_format_check.h"

namespace frugal::ops {
namespace {

class RefBackend final : public Backend {
 public:
  explicit RefBackend(DType act) : act_(act) {}
  std::string name() const override { return act_ == DType::kF32 ? "ref" : std::string("ref-") + dtype_name(act_); }
  DType activation_dtype() const override { return act_; }
  Result<void*> alloc(size_t nbytes) override {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64 + 64);
    if (!p) return resource_exhausted("ref backend: cannot allocate " + std::to_string(nbytes) + " bytes");
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  Status upload(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); return {}; }
  Status download(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); return {}; }
  Status memset_zero(void* dst, size_t n) override { std::memset(dst, 0, n); return {}; }
  Status synchronize() override { return {}; }
  bool weights_in_host_memory() const override { return true; }

  // Every op straight to ops::ref; matmul first refuses a weight format that is not one frugal
  // defines (the reference decodes every defined format).
#define FRUGAL_REF_BACKEND_OP_(Name, method) \
  Status method(const Name##Params& p) override { return run(p, ref::method); }
  FRUGAL_OPS(FRUGAL_REF_BACKEND_OP_)
#undef FRUGAL_REF_BACKEND_OP_
  bool supports_sample() const override { return true; }
  Status sample(const SampleParams& p) override { ref::sample(p); return {}; }

 private:
  template <class P>
  static Status run(const P& p, void (*op)(const P&)) {
    op(p);
    return {};
  }
  static Status run(const MatmulParams& p, void (*op)(const MatmulParams&)) {
    if (p.m > 0 && p.n > 0) FRUGAL_RETURN_IF_ERROR(check_weight_view(p.w, "ref matmul"));
    op(p);
    return {};
  }

  DType act_;
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend(DType activation) { return std::make_unique<RefBackend>(activation); }

}  // namespace frugal::ops
