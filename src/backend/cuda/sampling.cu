// One block per row. Thresholds for top-k and top-p are found by bisection on the value
// (each step counts or sums over the row, which sits in L2): no sort, no scratch memory.
#include "backend/cuda/common.cuh"
#include "backend/cuda/sampling.h"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kBisectSteps = 40;

__device__ __forceinline__ float uniform01(uint64_t seed, uint64_t i) {
  uint64_t z = seed ^ (i * 0x9E3779B97F4A7C15ull);  // splitmix64 of (seed, id)
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<float>(z >> 40) + 0.5f) * (1.f / 16777216.f);  // in (0, 1)
}

// Block argmax of (v, id): larger v wins, lower id on ties. Every thread gets the winner's id.
__device__ int block_argmax(float v, int id, float* red_v, int* red_i) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, v, o);
    int oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (ov > v || (ov == v && oi < id)) {
      v = ov;
      id = oi;
    }
  }
  __syncthreads();
  if (lane == 0) {
    red_v[warp] = v;
    red_i[warp] = id;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? red_v[lane] : -INFINITY;
    id = lane < (blockDim.x >> 5) ? red_i[lane] : 0x7fffffff;
    for (int o = 16; o > 0; o >>= 1) {
      float ov = __shfl_xor_sync(0xffffffffu, v, o);
      int oi = __shfl_xor_sync(0xffffffffu, id, o);
      if (ov > v || (ov == v && oi < id)) {
        v = ov;
        id = oi;
      }
    }
    if (lane == 0) red_i[0] = id;
  }
  __syncthreads();
  return red_i[0];
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleParams p) {
  pdl_wait();
  __shared__ float red[32];
  __shared__ float red_v[32];
  __shared__ int red_i[32];
  const int r = blockIdx.x;
  const float temp = p.temperature[r];
  const bool greedy = !(temp > 0.f);
  const float inv_t = greedy ? 1.f : 1.f / temp;
  const int64_t base = r * p.ld_logits;
  auto z_at = [&](int i) { return load_f(p.logits_dtype, p.logits, base + i) * inv_t; };

  float best = -INFINITY, zmin = INFINITY;
  int best_i = 0x7fffffff;
  if (greedy) {
    // Argmax only: f32 rows (the lm_head's output) are read as float4, four loads in flight a
    // thread (the generic loop below, one 4-byte load a step, was latency bound: ~20 us of a
    // batch-1 decode step for a 152k vocabulary). Each thread still visits its ids in ascending
    // order, so ties keep the lowest id as before.
    int i0 = 0;
    if (p.logits_dtype == DType::kF32 && p.ld_logits % 4 == 0 && (reinterpret_cast<uintptr_t>(p.logits) & 15u) == 0) {
      const float4* row = reinterpret_cast<const float4*>(static_cast<const float*>(p.logits) + base);
      const int n4 = p.vocab / 4;
#pragma unroll 4
      for (int j = threadIdx.x; j < n4; j += kThreads) {
        const float4 v = __ldg(row + j);
        const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (e[c] > best) {
            best = e[c];
            best_i = 4 * j + c;
          }
      }
      i0 = 4 * n4;
    }
    for (int i = i0 + threadIdx.x; i < p.vocab; i += kThreads) {
      const float z = z_at(i);
      if (z > best) {
        best = z;
        best_i = i;
      }
    }
    const int id = block_argmax(best, best_i, red_v, red_i);
    if (threadIdx.x == 0) p.out_ids[r] = id < p.vocab ? id : 0;  // all-NaN row: id 0
    return;
  }
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    float z = z_at(i);
    if (z > best) {  // strictly greater: each thread keeps its lowest id on ties
      best = z;
      best_i = i;
    }
    zmin = fminf(zmin, z);
  }
  const float zmax = block_max(best, red);
  zmin = -block_max(-zmin, red);

  float thr = -INFINITY;
  const int k = p.top_k ? p.top_k[r] : 0;
  if (k > 0 && k < p.vocab) {
    float lo = zmin, hi = zmax;  // invariant: count(z >= lo) >= k
    for (int step = 0; step < kBisectSteps; ++step) {
      float mid = 0.5f * (lo + hi);
      float cnt = 0.f;
      for (int i = threadIdx.x; i < p.vocab; i += kThreads) cnt += z_at(i) >= mid ? 1.f : 0.f;
      if (block_sum(cnt, red) >= static_cast<float>(k)) lo = mid; else hi = mid;
    }
    thr = lo;
  }
  const float top_p = p.top_p ? p.top_p[r] : 1.f;
  if (top_p > 0.f && top_p < 1.f) {
    float total = 0.f;
    for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
      float z = z_at(i);
      total += z >= thr ? __expf(z - zmax) : 0.f;
    }
    total = block_sum(total, red);
    float lo = thr == -INFINITY ? zmin : thr, hi = zmax;  // invariant: mass(z >= lo) >= p * total
    for (int step = 0; step < kBisectSteps; ++step) {
      float mid = 0.5f * (lo + hi);
      float mass = 0.f;
      for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
        float z = z_at(i);
        mass += z >= mid ? __expf(z - zmax) : 0.f;
      }
      if (block_sum(mass, red) >= top_p * total) lo = mid; else hi = mid;
    }
    thr = lo;
  }

  const uint64_t seed = p.seeds[r];
  best = -INFINITY;
  best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < p.vocab; i += kThreads) {
    float z = z_at(i);
    if (z < thr) continue;
    float g = z - __logf(-__logf(uniform01(seed, static_cast<uint64_t>(i))));
    if (g > best) {
      best = g;
      best_i = i;
    }
  }
  int id = block_argmax(best, best_i, red_v, red_i);
  if (threadIdx.x == 0) p.out_ids[r] = id < p.vocab ? id : 0;  // all-NaN row: id 0
}

}  // namespace

cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream) {
  if (p.n_rows == 0) return cudaSuccess;
  return launch_kernel(sample_kernel, static_cast<unsigned>(p.n_rows), kThreads, 0, stream, p);
}

}  // namespace frugal::cuda
