// The interface every backend (cpu, cuda) implements. The model calls only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "ops/params.h"

namespace frugal::ops {

enum class OpKind {
  kEmbedding,
  kRmsNorm,
  kMatmul,
  kRope,
  kKvWrite,
  kAttention,
  kSiluMul,
  kGatherRows,
};
const char* op_kind_name(OpKind k);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Activation dtype the backend computes in (f32 on the CPU, bf16 on CUDA).
  virtual DType activation_dtype() const = 0;

  // --- memory (device pointers; host memory on the CPU backend) ---
  virtual Result<void*> alloc(size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  virtual Status upload(void* dst, const void* src, size_t nbytes) = 0;    // host -> device
  virtual Status download(void* dst, const void* src, size_t nbytes) = 0;  // device -> host
  virtual Status memset_zero(void* dst, size_t nbytes) = 0;
  virtual Status synchronize() = 0;
  // Whether weights can be used in place from host memory (mmap): true on the CPU.
  virtual bool weights_in_host_memory() const = 0;
  // Free and total device memory in bytes (for sizing the KV pool); unsupported on host backends.
  virtual Status device_memory(size_t* free_bytes, size_t* total_bytes) {
    (void)free_bytes;
    (void)total_bytes;
    return unsupported(name() + " backend: no device memory to query");
  }

  // --- ops: each returns unsupported(...) for parameters it cannot run ---
  virtual Status embedding(const EmbeddingParams& p) = 0;
  virtual Status rms_norm(const RmsNormParams& p) = 0;
  virtual Status matmul(const MatmulParams& p) = 0;
  virtual Status rope(const RopeParams& p) = 0;
  virtual Status kv_write(const KvWriteParams& p) = 0;
  virtual Status attention(const AttentionParams& p) = 0;
  virtual Status silu_mul(const SiluMulParams& p) = 0;
  virtual Status gather_rows(const GatherRowsParams& p) = 0;
  // Token sampling where the logits are (optional: the engine samples on the host otherwise).
  virtual bool supports_sample() const { return false; }
  virtual Status sample(const SampleParams& p) {
    (void)p;
    return unsupported(name() + " backend: no sample op");
  }

  // --- step graphs (optional): record a step's ops once under a key, replay them later ---
  // A replay reruns the recorded kernels with the arguments they were recorded with, reading
  // whatever the device buffers hold at that time. `record` may only enqueue ops (no
  // allocation, upload, download or synchronization). Graphs are dropped when the backend
  // must move memory they refer to (e.g. growing its scratch); has_graph() then says false.
  virtual bool supports_graphs() const { return false; }
  virtual bool has_graph(uint64_t key) const {
    (void)key;
    return false;
  }
  virtual Status capture_graph(uint64_t key, const std::function<Status()>& record) {
    (void)key;
    (void)record;
    return unsupported(name() + " backend: no graphs");
  }
  virtual Status replay_graph(uint64_t key) {
    (void)key;
    return unsupported(name() + " backend: no graphs");
  }
  // Number of graphs held and the device memory they took when captured (estimate).
  virtual int64_t graph_count() const { return 0; }
  virtual int64_t graph_bytes() const { return 0; }
};

// Owning device buffer tied to a backend.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> create(Backend* backend, size_t nbytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return ptr_; }
  size_t size() const { return size_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace frugal::ops
