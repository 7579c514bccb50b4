// Correctness path for the quantized weight schemes (int8, int4, nf4, fp8 over the layout of
// ops/weight_format.h): one warp per output element, lanes split the internal columns, each
// weight element decoded in registers by ops::quant_weight_element (the same decoder the
// reference uses) and multiplied by x[k_perm[j']] (act order) or x[j']. No scratch memory, so
// it runs inside captured step graphs. Slow by design: the fast CUDA kernels are another issue.
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

}  // namespace

cudaError_t launch_matmul_quant(const ops::MatmulParams& p, cudaStream_t stream) {
  if (p.m * p.n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = ceil_div(p.m * p.n * 32, threads);
  return launch_kernel(matmul_quant_kernel, static_cast<unsigned>(blocks), threads, 0, stream, p,
                       ops::quant_geometry(p.w.format, p.n, p.k));
}

}  // namespace frugal::cuda
