// FP8 W8A8 operands for cuBLASLt's FP8 GEMM (gemm_lt.h, LtGemm::run_fp8): the activations
// quantized to E4M3 on the fly with dynamic scales, and the weight's scales in the layout cuBLASLt
// reads. See kernels.h for the layouts.
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace frugal::cuda {
namespace {

constexpr float kE4m3Max = 448.f;

__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Per token (one block per token row): scale = amax(row) / 448, codes = round(x / scale).
__global__ void quantize_fp8_per_token_kernel(const void* x, DType x_dtype, int64_t ld_x, int64_t k, int64_t k_pad,
                                              uint8_t* xq, float* xs) {
  pdl_wait();
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  float amax = 0.f;
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) amax = fmaxf(amax, fabsf(load_f(x_dtype, x, t * ld_x + j)));
  amax = block_max(amax, red);
  const float inv = amax > 0.f ? kE4m3Max / amax : 0.f;
  for (int64_t j = threadIdx.x; j < k_pad; j += blockDim.x)
    xq[t * k_pad + j] = j < k ? to_e4m3(load_f(x_dtype, x, t * ld_x + j) * inv) : 0;
  if (threadIdx.x == 0) xs[t] = amax / kE4m3Max;
}

// Per token and 128 inputs (one warp per (token, 128-block)): scale = amax / 448, stored
// [k_blocks][ld_s] (token fastest), as cuBLASLt's VEC128_32F reads the B operand's scales.
__global__ void quantize_fp8_per_128_kernel(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k,
                                            int64_t k_pad, uint8_t* xq, float* xs, int64_t ld_s) {
  pdl_wait();
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t kb = ceil_div(k_pad, 128);
  if (warp >= m * kb) return;
  const int64_t t = warp / kb, b = warp % kb;
  float v[4];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t j = b * 128 + i * 32 + lane;
    v[i] = j < k ? load_f(x_dtype, x, t * ld_x + j) : 0.f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = warp_max(amax);
  const float inv = amax > 0.f ? kE4m3Max / amax : 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t j = b * 128 + i * 32 + lane;
    if (j < k_pad) xq[t * k_pad + j] = to_e4m3(v[i] * inv);
  }
  if (lane == 0) xs[b * ld_s + t] = amax / kE4m3Max;
}

// The weight's scales for cuBLASLt: per tensor -> one per output row; 128 x 128 blocks with a
// k-block count that is not a multiple of 4 -> rows padded to a multiple of 4.
__global__ void fp8_weight_scales_kernel(const float* s, int64_t rows, int64_t cols, int64_t ld_out, bool broadcast,
                                         float* out) {
  pdl_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * ld_out) return;
  const int64_t r = i / ld_out, c = i % ld_out;
  out[i] = broadcast ? s[0] : (c < cols ? s[r * cols + c] : 0.f);
}

}  // namespace

cudaError_t launch_quantize_fp8_act(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k, int64_t k_pad,
                                    bool per_128, uint8_t* xq, float* xs, int64_t ld_s, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (!per_128)
    return launch_kernel(quantize_fp8_per_token_kernel, static_cast<unsigned>(m), 256, 0, stream, x, x_dtype, ld_x, k,
                         k_pad, xq, xs);
  const int threads = 256;
  const int64_t warps = m * ceil_div(k_pad, 128);
  return launch_kernel(quantize_fp8_per_128_kernel, static_cast<unsigned>(ceil_div(warps * 32, threads)), threads, 0,
                       stream, x, x_dtype, ld_x, m, k, k_pad, xq, xs, ld_s);
}

cudaError_t launch_fp8_weight_scales(const float* s, int64_t rows, int64_t cols, int64_t ld_out, bool broadcast,
                                     float* out, cudaStream_t stream) {
  const int64_t total = rows * ld_out;
  if (total == 0) return cudaSuccess;
  return launch_kernel(fp8_weight_scales_kernel, static_cast<unsigned>(ceil_div(total, 256)), 256, 0, stream, s, rows,
                       cols, ld_out, broadcast, out);
}

}  // namespace frugal::cuda
