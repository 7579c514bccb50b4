// Correctness path for the quantized weight schemes (int8, int4, nf4, fp8 over the layout of
// ops/weight_format.h): one warp per output element, lanes split the internal columns, each
// weight element decoded in registers by ops::quant_weight_element (the same decoder the
// reference uses) and multiplied by x[k_perm[j']] (act order) or x[j']. No scratch memory, so
// it runs inside captured step graphs. Slow by design: the fast CUDA kernels are another issue.
#include <algorithm>

#include <cuda_fp8.h>

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

// The value of internal code j' of a row (before scale and offset).
__device__ __forceinline__ float code_value(const ops::WeightFormat& f, const uint8_t* row, int64_t jp) {
  if (f.packing == ops::WeightPacking::kBlock32Nibbles) {
    const uint8_t byte = row[(jp >> 5) * 16 + (jp & 15)];
    const int code = (jp & 31) < 16 ? (byte & 0xf) : (byte >> 4);
    if (f.scheme == ops::WeightScheme::kNf4) {
      constexpr float kBook[16] = {FRUGAL_NF4_CODEBOOK};
      return kBook[code];
    }
    return static_cast<float>(code);
  }
  if (f.scheme == ops::WeightScheme::kFp8) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(row[jp]), __NV_E4M3);
    return __half2float(__half(h));
  }
  return static_cast<float>(static_cast<int8_t>(row[jp]));
}

// W[o, j] (original input order) as bf16, for the dequantize-then-cuBLASLt path of large m: one
// block per row (grid-stride over rows), each thread 8 consecutive codes of one scale group, so
// the group's scale and offset are read once per 8 values and, without act order, the 8 values
// leave in one 16-byte store.
__global__ void dequant_bf16_kernel(ops::WeightView w, ops::QuantGeometry g, int64_t n, int64_t k,
                                    __nv_bfloat16* out) {
  pdl_wait();
  const ops::WeightFormat& f = w.format;
  const bool perm = f.act_order;
  const bool zeros = f.zero == ops::ZeroPoint::kOffset;
  const bool vec = !perm && k % 8 == 0 && (reinterpret_cast<uintptr_t>(out) & 15u) == 0;
  for (int64_t o = blockIdx.x; o < n; o += gridDim.x) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * g.row_bytes;
    const float* sc = static_cast<const float*>(w.scales) + (o / g.group_n) * g.groups_k;
    const float* zr = zeros ? static_cast<const float*>(w.zeros) + o * g.groups_k : nullptr;
    __nv_bfloat16* orow = out + o * k;
    for (int64_t j0 = static_cast<int64_t>(threadIdx.x) * 8; j0 < k; j0 += static_cast<int64_t>(blockDim.x) * 8) {
      const int64_t gk = j0 / g.group_k;  // 8 codes never straddle a group (group_k is a multiple of 32)
      const float s = sc[gk], z = zr ? zr[gk] : 0.f;
      if (vec) {
        __align__(16) __nv_bfloat16 v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = __float2bfloat16(fmaf(s, code_value(f, row, j0 + i), z));
        *reinterpret_cast<uint4*>(orow + j0) = *reinterpret_cast<const uint4*>(v);
      } else {
        for (int64_t jp = j0; jp < j0 + 8 && jp < k; ++jp)
          orow[perm ? w.k_perm[jp] : jp] = __float2bfloat16(fmaf(s, code_value(f, row, jp), z));
      }
    }
  }
}

}  // namespace

cudaError_t launch_dequant_bf16(const ops::WeightView& w, int64_t n, int64_t k, void* out, cudaStream_t stream) {
  if (n * k == 0) return cudaSuccess;
  const int threads = 128;
  const int64_t blocks = std::min<int64_t>(n, 132 * 16);
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
