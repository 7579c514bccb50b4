// Device helpers shared by the CUDA kernels: dtype-generic loads/stores, warp reductions.
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <utility>

#include "core/dtype.h"

namespace frugal::cuda {

// A process-wide switch of a kernel variant, on unless its environment variable starts with '0'
// (read at first use); set() wins. Tests and benchmarks flip it between launches on one thread,
// nothing else writes it.
class DefaultOnSwitch {
 public:
  explicit constexpr DefaultOnSwitch(const char* env) : env_(env) {}
  bool on() {
    if (mode_ < 0) {
      const char* e = std::getenv(env_);
      mode_ = (e != nullptr && e[0] == '0') ? 0 : 1;
    }
    return mode_ == 1;
  }
  void set(bool on) { mode_ = on ? 1 : 0; }

 private:
  const char* env_;
  int mode_ = -1;  // -1: not read yet
};

// Programmatic dependent launch (sm_90+): each kernel is launched allowed to start while the
// previous one drains; its blocks wait in pdl_wait() until that grid has completed and its
// writes are visible, which hides most of the launch gap between the many small kernels of a
// decode step. pdl_wait() must come before a kernel touches any memory. Off before sm_90 and
// with FRUGAL_PDL=0 (set_pdl_enabled, read by the backend at creation).
bool pdl_enabled();
void set_pdl_enabled(bool on);

// pdl_wait's two halves, apart for a kernel whose own loads must not meet the next kernel's
// early ones: the wait alone, then (once those loads are done) the trigger that lets the next
// kernel launch. A block that exits without the trigger counts as triggered; the next kernel's
// pdl_wait still waits for this whole grid, so where the trigger sits changes only timing.
__device__ __forceinline__ void pdl_wait_only() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
  pdl_wait_only();
  pdl_trigger();
}

// An on/off A/B knob from the environment: 1 where the variable's value starts with '1'. Call
// sites keep it in a function-local static, so it is read once.
inline int env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && e[0] == '1' ? 1 : 0;
}

template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Element access for the float activation dtypes the kernels accept (f32, f16, bf16). The
// dtype is uniform across a launch, so the switch costs a predictable branch, not divergence.
__device__ __forceinline__ float load_f(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case DType::kF16: return __half2float(static_cast<const __half*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

__device__ __forceinline__ void store_f(DType t, void* base, int64_t i, float v) {
  switch (t) {
    case DType::kBF16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16(v); return;
    case DType::kF16: static_cast<__half*>(base)[i] = __float2half(v); return;
    default: static_cast<float*>(base)[i] = v; return;
  }
}

// Rounds through dtype t (what a store followed by a load would give).
__device__ __forceinline__ float round_to(DType t, float v) {
  switch (t) {
    case DType::kBF16: return __bfloat162float(__float2bfloat16(v));
    case DType::kF16: return __half2float(__float2half(v));
    default: return v;
  }
}

// One RoPE pair (x0, x1) turned by the angle whose cos / sin (times attention_factor) are c, s:
// rotate_half's (i, i + half) or interleaved (2i, 2i + 1). Every RoPE kernel uses this expression,
// so the fused RoPE + KV write rounds exactly as rope then kv_write.
__device__ __forceinline__ float2 rope_rotate(float x0, float x1, float c, float s) {
  return make_float2(x0 * c - x1 * s, x1 * c + x0 * s);
}

// SwiGLU's silu(g) * u in f32, as every kernel computes it (silu_mul, and the gate_up GEMV
// epilogues that fuse it), so the fused and unfused paths round alike.
__device__ __forceinline__ float silu_mul_f(float g, float u) { return g / (1.f + __expf(-g)) * u; }

// Asks L2 for `bytes` (a multiple of 16) from 16-byte aligned `ptr` with one bulk prefetch
// (sm_90; nothing before): no registers, and the loads that follow hit L2.
__device__ __forceinline__ void prefetch_l2(const void* ptr, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes) : "memory");
#endif
}

// Asks L2 for the 128-byte lines holding [ptr, ptr + bytes) (any alignment), one prefetch a line.
__device__ __forceinline__ void prefetch_l2_lines(const void* ptr, uint32_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(ptr);
  for (uintptr_t line = b & ~uintptr_t{127}; line < b + bytes; line += 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
}

// 16 bytes of streamed data (weights read once a step): read-only path, no L1 allocation (so
// small activation rows re-read by every warp stay in L1), 256-byte L2 prefetch.
__device__ __forceinline__ uint4 load_stream16(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}

// The 8 bf16 values of a 16-byte vector as floats, in order.
__device__ __forceinline__ void unpack_bf16x8(const uint4& u, float f[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 x = __bfloat1622float2(h[e]);
    f[2 * e] = x.x;
    f[2 * e + 1] = x.y;
  }
}

// sum_q a[q] * b[q] over 8 bf16 pairs in f32, in q order (one fma chain).
__device__ __forceinline__ float dot_bf16x8(uint4 a, uint4 b) {
  const auto* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
  const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 x = __bfloat1622float2(a2[q]), y = __bfloat1622float2(b2[q]);
    s = fmaf(x.x, y.x, s);
    s = fmaf(x.y, y.y, s);
  }
  return s;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `red` holds >= 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // `red` may still be read by a previous reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < n_warps ? red[lane] : 0.f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < n_warps ? red[lane] : -INFINITY;
  return warp_max(v);
}

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A kernel's dynamic shared-memory limit, raised once per process (the attribute is per
// function; host work kept out of every later launch), and its resident blocks per SM, queried
// once (`fallback` when the query fails).
template <auto Kernel>
cudaError_t raise_dynamic_smem_once(size_t smem) {
  static const cudaError_t e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  return e;
}
template <auto Kernel>
int cached_blocks_per_sm(int threads, size_t smem, int fallback) {
  static const int n = [&] {
    int b = 0;
    // Only a limit above the default needs raising; asking with less would latch a smaller limit
    // into raise_dynamic_smem_once for the kernel's later launches.
    if ((smem > 48 * 1024 && raise_dynamic_smem_once<Kernel>(smem) != cudaSuccess) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, threads, smem) != cudaSuccess || b < 1)
      b = fallback;
    return b;
  }();
  return n;
}

}  // namespace frugal::cuda
