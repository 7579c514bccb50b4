// Kernels of the CUDA QuantMath: conversions, AutoAWQ's fake quantization for the scale search,
// a squared-difference reduction, and the clipping search. The quantization arithmetic repeats
// quantize/rtn.h's AWQ rule operation for operation (IEEE division, round to nearest even,
// f16-rounded scales), so codes equal the host's for equal inputs.
#include <cuda_fp16.h>

#include <cmath>

#include "quantize/cuda/kernels.h"

namespace frugal::quantize::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

__device__ float f16_scale(float s) {
  float r = __half2float(__float2half_rn(s));
  if (!(r > 0)) r = 5.9604645e-08f;  // smallest f16 subnormal, as rtn.cpp
  if (isinf(r)) r = 65504.0f;
  return r;
}

__device__ float warp_min(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide min and max (every thread gets them).
__device__ void block_min_max(float& mn, float& mx) {
  __shared__ float smn[kWarps], smx[kWarps];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  mn = warp_min(mn);
  mx = warp_max(mx);
  __syncthreads();
  if (lane == 0) {
    smn[wid] = mn;
    smx[wid] = mx;
  }
  __syncthreads();
  mn = smn[0];
  mx = smx[0];
  for (int i = 1; i < kWarps; ++i) {
    mn = fminf(mn, smn[i]);
    mx = fmaxf(mx, smx[i]);
  }
}

__global__ void f32_to_f64_kernel(const float* x, double* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = static_cast<double>(x[i]);
}
__global__ void f64_to_f32_kernel(const double* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = static_cast<float>(x[i]);
}

__global__ void gptq_permute_damp_kernel(const double* h, double* hp, const int64_t* perm, const uint8_t* dead, double damp,
                                         int64_t k) {
  for (int64_t a = blockIdx.y; a < k; a += gridDim.y) {
    const double* src = h + perm[a] * k;
    for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < k; b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      double v = src[perm[b]];
      if (b == a) v = (dead[a] ? 1.0 : v) + damp;
      hp[a * k + b] = v;
    }
  }
}

__global__ void awq_fake_quant_kernel(const float* w, const float* sc, float* out, int64_t in, int64_t group, int32_t maxq) {
  const int64_t r = blockIdx.x, g = blockIdx.y;
  const float* wr = w + r * in + g * group;
  const float* s = sc + g * group;
  float* o = out + r * in + g * group;
  float mn = INFINITY, mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < group; j += blockDim.x) {
    const float v = wr[j] * s[j];
    mn = fminf(mn, v);
    mx = fmaxf(mx, v);
  }
  block_min_max(mn, mx);
  const float scale = f16_scale(fmaxf(mx - mn, 1e-5f) / static_cast<float>(maxq));
  const int32_t zero = static_cast<int32_t>(fminf(fmaxf(-rintf(mn / scale), 0.0f), static_cast<float>(maxq)));
  for (int64_t j = threadIdx.x; j < group; j += blockDim.x) {
    const float v = wr[j] * s[j];
    float q = rintf(v / scale) + static_cast<float>(zero);
    q = fminf(fmaxf(q, 0.0f), static_cast<float>(maxq));
    const float d = __fmul_rn(static_cast<float>(static_cast<int32_t>(q) - zero), scale);
    o[j] = d / s[j];
  }
}

__global__ void sq_diff_sum_kernel(const float* a, const float* b, int64_t n, double* acc) {
  double v = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    v += d * d;
  }
  __shared__ double sd[kWarps];
  v = warp_sum_d(v);
  if ((threadIdx.x & 31) == 0) sd[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0;
    for (int i = 0; i < kWarps; ++i) t += sd[i];
    atomicAdd(acc, t);
  }
}

__global__ void awq_clip_kernel(float* w, int64_t in, int64_t group, int32_t maxq, const float* xs, int64_t ns) {
  extern __shared__ float cur[];  // [group]
  __shared__ double se[kWarps];
  __shared__ float sam[kWarps];
  const int64_t r = blockIdx.x, g = blockIdx.y;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  float* wr = w + r * in + g * group;
  float am = 0;
  for (int64_t j = threadIdx.x; j < group; j += blockDim.x) am = fmaxf(am, fabsf(wr[j]));
  am = warp_max(am);
  if (lane == 0) sam[wid] = am;
  __syncthreads();
  am = sam[0];
  for (int i = 1; i < kWarps; ++i) am = fmaxf(am, sam[i]);
  double best = INFINITY;
  float best_max = am;
  for (int i_s = 0; i_s < 10; ++i_s) {
    const float mv = __fmul_rn(am, 1.0f - static_cast<float>(i_s) / 20.0f);
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x) {
      const float c = fminf(fmaxf(wr[j], -mv), mv);
      cur[j] = c;
      mn = fminf(mn, c);
      mx = fmaxf(mx, c);
    }
    block_min_max(mn, mx);
    const float scale = f16_scale(fmaxf(mx - mn, 1e-5f) / static_cast<float>(maxq));
    const int32_t zero = static_cast<int32_t>(fminf(fmaxf(-rintf(mn / scale), 0.0f), static_cast<float>(maxq)));
    for (int64_t j = threadIdx.x; j < group; j += blockDim.x) {
      float q = rintf(cur[j] / scale) + static_cast<float>(zero);
      q = fminf(fmaxf(q, 0.0f), static_cast<float>(maxq));
      cur[j] = wr[j] - __fmul_rn(static_cast<float>(static_cast<int32_t>(q) - zero), scale);
    }
    __syncthreads();
    double e = 0;
    for (int64_t t = wid; t < ns; t += kWarps) {
      const float* xr = xs + t * in + g * group;
      float d = 0;
      for (int64_t j = lane; j < group; j += 32) d += xr[j] * cur[j];
      d = warp_sum(d);
      e += static_cast<double>(d) * d;
    }
    if (lane == 0) se[wid] = e;
    __syncthreads();
    e = 0;
    for (int i = 0; i < kWarps; ++i) e += se[i];
    if (e < best) {
      best = e;
      best_max = mv;
    }
    __syncthreads();
  }
  for (int64_t j = threadIdx.x; j < group; j += blockDim.x) wr[j] = fminf(fmaxf(wr[j], -best_max), best_max);
}

int grid_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace

void launch_f32_to_f64(const float* x, double* y, int64_t n, cudaStream_t s) {
  f32_to_f64_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n);
}
void launch_f64_to_f32(const double* x, float* y, int64_t n, cudaStream_t s) {
  f64_to_f32_kernel<<<grid_for(n), kThreads, 0, s>>>(x, y, n);
}
void launch_gptq_permute_damp(const double* h, double* hp, const int64_t* perm, const uint8_t* dead, double damp, int64_t k,
                              cudaStream_t s) {
  const int64_t bx = (k + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(bx < 64 ? bx : 64), static_cast<unsigned>(k < 65535 ? k : 65535));
  gptq_permute_damp_kernel<<<grid, kThreads, 0, s>>>(h, hp, perm, dead, damp, k);
}
void launch_awq_fake_quant(const float* w, const float* sc, float* out, int64_t rows, int64_t in, int64_t group,
                           int32_t maxq, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(in / group));
  awq_fake_quant_kernel<<<grid, kThreads, 0, s>>>(w, sc, out, in, group, maxq);
}
void launch_sq_diff_sum(const float* a, const float* b, int64_t n, double* acc, cudaStream_t s) {
  sq_diff_sum_kernel<<<grid_for(n) < 1024 ? grid_for(n) : 1024, kThreads, 0, s>>>(a, b, n, acc);
}
void launch_awq_clip(float* w, int64_t out, int64_t in, int64_t group, int32_t maxq, const float* xs, int64_t ns,
                     cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(out), static_cast<unsigned>(in / group));
  awq_clip_kernel<<<grid, kThreads, static_cast<size_t>(group) * sizeof(float), s>>>(w, in, group, maxq, xs, ns);
}

}  // namespace frugal::quantize::cuda
