// The split-KV combine fused into the decode kernels (attention_decode.cu,
// attention_decode_mma.cu): every split block of a (token, head unit) bumps a counter after it
// wrote its partial rows and (max, sum) pairs; the block that takes the last ticket merges all
// splits itself, so no separate combine launch (and its launch gap and ramp) follows.
// The merge reads every split in a fixed order (splits 0..S-1, one lane stride and one xor tree
// for the max and the sum), so its result does not depend on which block finished last: the same
// inputs give the same bits on every run. The counters live in memory the backend zeroes once;
// the merging block resets its counter to 0, so every launch finds them zero (stream order and
// griddepcontrol.wait keep launches apart). The MLA kernels (mla.cu) take the same tickets.
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "ops/params.h"

namespace frugal::cuda {

// Called by all threads of a split block after its partial rows are written: whether this block
// took the last of its (token, head unit)'s n_splits tickets. That block alone returns true (in
// every thread), sees the other blocks' rows (read them with __ldcg) and has reset the counter.
__device__ __forceinline__ bool take_last_split_ticket(uint32_t* counter, int n_splits) {
  __shared__ int s_last;
  __threadfence();  // this thread's partial rows are visible device-wide before the ticket
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(counter, 1u) == static_cast<uint32_t>(n_splits - 1);
  __syncthreads();
  if (!s_last) return false;
  __threadfence();  // the other blocks' rows (made visible before their tickets) are read after this
  if (threadIdx.x == 0) *counter = 0u;
  return true;
}

// Called by all threads of every block of a split launch, after the block's partial rows of
// token t (rows h0 .. h0 + n_h of [n_tokens, n_head, n_splits, D] part_o and part_ml; an empty
// split writes only (-inf, 0) pairs) are written. smem: at least n_h * (n_splits + 1) floats the
// block no longer uses. The last block writes out[t, h0 .. h0 + n_h) normalized.
template <int D, int kThreads>
__device__ __forceinline__ void fused_combine(const ops::AttentionParams& p, int n_splits, const float* part_o,
                                              const float2* part_ml, uint32_t* counter, int t, int h0, int n_h,
                                              float* smem) {
  constexpr int kW = kThreads / 32, kC = D / 4, kBatch = 8;
  if (!take_last_split_ticket(counter, n_splits)) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* wts = smem;                // [n_h][n_splits]: the splits' weights
  float* sum = smem + n_h * n_splits;  // [n_h]
  const int64_t row0 = (static_cast<int64_t>(t) * p.n_head + h0) * n_splits;
  for (int r = warp; r < n_h; r += kW) {
    const float2* ml = part_ml + row0 + static_cast<int64_t>(r) * n_splits;
    float m = -INFINITY;
    for (int s = lane; s < n_splits; s += 32) {
      const float2 v = __ldcg(ml + s);
      const float ms = v.y > 0.f ? v.x : -INFINITY;  // an empty split holds no values
      wts[r * n_splits + s] = ms;
      m = fmaxf(m, ms);
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.f;
    for (int s = lane; s < n_splits; s += 32) {
      const float ms = wts[r * n_splits + s];
      const float w = ms == -INFINITY ? 0.f : exp2f(ms - m);
      l = fmaf(w, __ldcg(ml + s).y, l);
      wts[r * n_splits + s] = w;
    }
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) sum[r] = l;
  }
  __syncthreads();
  // One 4-dim column of one head per thread at a time; kBatch split rows in flight.
  for (int idx = threadIdx.x; idx < n_h * kC; idx += kThreads) {
    const int r = idx / kC, c = idx % kC;
    const float* w = wts + r * n_splits;
    const float4* part = reinterpret_cast<const float4*>(part_o + (row0 + static_cast<int64_t>(r) * n_splits) * D) + c;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < n_splits; s0 += kBatch) {
      float4 v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int s = s0 + b;
        v[b] = s < n_splits && w[s] != 0.f ? __ldcg(part + static_cast<int64_t>(s) * kC) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const float ws = s0 + b < n_splits ? w[s0 + b] : 0.f;
        acc.x = fmaf(ws, v[b].x, acc.x);
        acc.y = fmaf(ws, v[b].y, acc.y);
        acc.z = fmaf(ws, v[b].z, acc.z);
        acc.w = fmaf(ws, v[b].w, acc.w);
      }
    }
    const float l = sum[r];
    __nv_bfloat16* o = static_cast<__nv_bfloat16*>(p.out) + static_cast<int64_t>(t) * p.ld_out + (h0 + r) * D + 4 * c;
    o[0] = __float2bfloat16(l > 0.f ? acc.x / l : 0.f);
    o[1] = __float2bfloat16(l > 0.f ? acc.y / l : 0.f);
    o[2] = __float2bfloat16(l > 0.f ? acc.z / l : 0.f);
    o[3] = __float2bfloat16(l > 0.f ? acc.w / l : 0.f);
  }
}

}  // namespace frugal::cuda
