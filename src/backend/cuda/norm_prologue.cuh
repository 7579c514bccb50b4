// An RMSNorm computed in the prologue of the kernel that consumes it (the fused ops
// rms_norm_matmul, gemv.cu, and moe_router, moe.cu): y = rms_norm(x) * w of one row of dim <=
// 8 * kNormMaxVec bf16 values, by every block for itself into shared memory (one block may also
// write y, for the ops that read it later). Its sum of squares has rms_norm_bf16_kernel's
// partition and order at the block size that kernel launches with for the row (ceil(dim / 256)
// warps of one 8-wide vector a thread, then block_sum), so the row is the same bits rms_norm
// writes: thread t of a kThreads-thread block plays that kernel's threads t, t + kThreads, ...
// (its "virtual warps" warp, warp + kThreads / 32, ...). Included only by .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/common.cuh"

namespace frugal::cuda {

struct RowNorm {
  const __nv_bfloat16* x = nullptr;  // the input row
  __nv_bfloat16* y = nullptr;        // the output row (written where asked)
  const __nv_bfloat16* w = nullptr;  // the norm weight
  int dim = 0;
  float eps = 0.f;
};
constexpr int kNormMaxVec = 512;  // dim <= 4096

__device__ __forceinline__ uint4 norm_pack8(const float (&f)[8]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = __floats2bfloat162_rn(f[2 * e], f[2 * e + 1]);
  return u;
}

// After the PDL wait, by all kThreads threads of the block (two __syncthreads): the normalized
// row into xs ([dim / 8] 16-byte vectors); write_y: also into nrm.y. The raw row goes through xs
// itself (its sum of squares on the way), so only the reduction's partial sums stay in registers.
// red: 32 floats of shared memory.
template <int kThreads>
__device__ __forceinline__ void norm_prologue(const RowNorm& nrm, uint4* xs, float* red, bool write_y) {
  static_assert(kThreads % 32 == 0 && kNormMaxVec % kThreads == 0, "whole warps, whole vectors a thread");
  constexpr int kV = kNormMaxVec / kThreads, kWarpsHere = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nvec = nrm.dim / 8, vwarps = nvec > 32 ? (nvec + 31) / 32 : 1;
  float ss[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const int vt = tid + kThreads * j;
    ss[j] = 0.f;
    if (vt < nvec) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(nrm.x + vt * 8));
      xs[vt] = v;
      float f[8];
      unpack_bf16x8(v, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ss[j] += f[e] * f[e];
    }
  }
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const float t = warp_sum(ss[j]);
    const int vw = warp + kWarpsHere * j;
    if (lane == 0 && vw < vwarps) red[vw] = t;
  }
  __syncthreads();
  const float tot = warp_sum(lane < vwarps ? red[lane] : 0.f);
  const float inv = rsqrtf(tot / static_cast<float>(nrm.dim) + nrm.eps);
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const int vt = tid + kThreads * j;
    if (vt >= nvec) continue;
    float f[8], wf[8], o[8];
    unpack_bf16x8(xs[vt], f);
    unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(nrm.w + vt * 8)), wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = f[e] * inv * wf[e];
    const uint4 packed = norm_pack8(o);
    xs[vt] = packed;
    if (write_y) *reinterpret_cast<uint4*>(nrm.y + vt * 8) = packed;
  }
  __syncthreads();
}

}  // namespace frugal::cuda
