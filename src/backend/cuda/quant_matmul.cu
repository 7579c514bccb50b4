// Correctness path for the quantized weight schemes (int8, int4, nf4, fp8 over the layout of
// ops/weight_format.h): one warp per output element, lanes split the internal columns, each
// weight element decoded in registers by ops::quant_weight_element (the same decoder the
// reference uses) and multiplied by x[k_perm[j']] (act order) or x[j']. No scratch memory, so
// it runs inside captured step graphs. Slow by design: the fast CUDA kernels are another issue.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "ops/quant_element.h"

namespace frugal::cuda {
namespace {

__global__ void matmul_quant_kernel(ops::MatmulParams p, ops::QuantGeometry g) {
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t out = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (out >= p.m * p.n) return;
  const int64_t i = out / p.n, o = out % p.n;
  const int32_t* perm = p.w.format.act_order ? p.w.k_perm : nullptr;
  float acc = 0.f;
  for (int64_t j = lane; j < p.k; j += 32) {
    const int64_t xj = perm ? perm[j] : j;
    acc += load_f(p.x_dtype, p.x, i * p.ld_x + xj) * ops::quant_weight_element(p.w, g, o, j);
  }
  acc = warp_sum(acc);
  if (lane == 0) {
    if (p.bias) acc += load_f(p.bias_dtype, p.bias, o);
    if (p.accumulate) acc += load_f(p.y_dtype, p.y, i * p.ld_y + o);
    store_f(p.y_dtype, p.y, i * p.ld_y + o, acc);
  }
}

// W[o, j] (original input order) as bf16, for the dequantize-then-cuBLASLt path of large m.
__global__ void dequant_bf16_kernel(ops::WeightView w, ops::QuantGeometry g, int64_t n, int64_t k,
                                    __nv_bfloat16* out) {
  pdl_wait();
  const int64_t total = n * k;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = e / k, jp = e % k;
    const int64_t j = w.format.act_order ? w.k_perm[jp] : jp;
    out[o * k + j] = __float2bfloat16(ops::quant_weight_element(w, g, o, jp));
  }
}

}  // namespace

cudaError_t launch_dequant_bf16(const ops::WeightView& w, int64_t n, int64_t k, void* out, cudaStream_t stream) {
  if (n * k == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>(ceil_div(n * k, threads), 132 * 64);
  return launch_kernel(dequant_bf16_kernel, static_cast<unsigned>(blocks), threads, 0, stream, w,
                       ops::quant_geometry(w.format, n, k), n, k, static_cast<__nv_bfloat16*>(out));
}

cudaError_t launch_matmul_quant(const ops::MatmulParams& p, cudaStream_t stream) {
  if (p.m * p.n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = ceil_div(p.m * p.n * 32, threads);
  return launch_kernel(matmul_quant_kernel, static_cast<unsigned>(blocks), threads, 0, stream, p,
                       ops::quant_geometry(p.w.format, p.n, p.k));
}

}  // namespace frugal::cuda
