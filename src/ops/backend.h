// The interface every backend (cpu, cuda) implements. The model calls only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "ops/op_list.h"
#include "ops/params.h"

namespace frugal::ops {

// Every op, from ops/op_list.h (required ops first, then optional ones).
enum class OpKind {
#define FRUGAL_OP_KIND_(Name, method) k##Name,
  FRUGAL_ALL_OPS(FRUGAL_OP_KIND_)
#undef FRUGAL_OP_KIND_
};
inline constexpr int kNumOpKinds = 0
#define FRUGAL_OP_COUNT_(Name, method) +1
    FRUGAL_ALL_OPS(FRUGAL_OP_COUNT_)
#undef FRUGAL_OP_COUNT_
    ;
// The op's method name ("rms_norm").
const char* op_kind_name(OpKind k);
// Whether every backend has the op (FRUGAL_OPS, and FRUGAL_FUSED_OPS through their default) or
// may refuse it (FRUGAL_OPTIONAL_OPS).
bool op_is_required(OpKind k);

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

  // A quantized n x k weight just placed in this backend's memory (codes, scales, offsets as
  // w names them), offered once before any op reads it: the backend may re-lay its codes in
  // place into a layout its kernels read faster and returns the format the weight now has
  // (the CUDA backend: int4 in kOutInTiles8). Default: unchanged.
  virtual Result<WeightFormat> prepare_weight(const WeightView& w, int64_t n, int64_t k) {
    (void)n;
    (void)k;
    return w.format;
  }

  // --- ops (ops/op_list.h): each returns unsupported(...) for parameters it cannot run ---
#define FRUGAL_BACKEND_OP_(Name, method) virtual Status method(const Name##Params& p) = 0;
  FRUGAL_OPS(FRUGAL_BACKEND_OP_)
#undef FRUGAL_BACKEND_OP_
  // Optional ops (ops/op_list.h; sample: token sampling where the logits are, else the engine
  // samples on the host): supports_<op>() says whether the backend has it.
#define FRUGAL_BACKEND_OPTIONAL_OP_(Name, method)                           \
  virtual bool supports_##method() const { return false; }                  \
  virtual Status method(const Name##Params& p) {                            \
    (void)p;                                                                \
    return unsupported(name() + " backend: no " #method " op");             \
  }
  FRUGAL_OPTIONAL_OPS(FRUGAL_BACKEND_OPTIONAL_OP_)
#undef FRUGAL_BACKEND_OPTIONAL_OP_
  // Fused ops (ops/op_list.h): the default runs the sequence through this backend's ops
  // (backend.cpp); a backend overrides one to fuse it.
#define FRUGAL_BACKEND_FUSED_OP_(Name, method) virtual Status method(const Name##Params& p);
  FRUGAL_FUSED_OPS(FRUGAL_BACKEND_FUSED_OP_)
#undef FRUGAL_BACKEND_FUSED_OP_

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
