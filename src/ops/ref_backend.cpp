#include "ops/ref_backend.h"

#include <cstdlib>
#include <cstring>

#include "ops/reference.h"

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

  Status embedding(const EmbeddingParams& p) override { ref::embedding(p); return {}; }
  Status rms_norm(const RmsNormParams& p) override { ref::rms_norm(p); return {}; }
  Status matmul(const MatmulParams& p) override { ref::matmul(p); return {}; }
  Status rope(const RopeParams& p) override { ref::rope(p); return {}; }
  Status kv_write(const KvWriteParams& p) override { ref::kv_write(p); return {}; }
  Status attention(const AttentionParams& p) override { ref::attention(p); return {}; }
  Status silu_mul(const SiluMulParams& p) override { ref::silu_mul(p); return {}; }
  Status gather_rows(const GatherRowsParams& p) override { ref::gather_rows(p); return {}; }
  bool supports_sample() const override { return true; }
  Status sample(const SampleParams& p) override { ref::sample(p); return {}; }

 private:
  DType act_;
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend(DType activation) { return std::make_unique<RefBackend>(activation); }

}  // namespace frugal::ops
