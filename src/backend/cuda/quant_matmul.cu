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

// The value of internal code j' of row o (before scale and offset); int4 / int8 codes row-major
// or in kOutInTiles8 (ops::quant_code_byte), fp8 row-major.
__device__ __forceinline__ float code_value(const ops::WeightFormat& f, const ops::QuantGeometry& g, const uint8_t* codes,
                                            int64_t o, int64_t jp) {
  const uint8_t* row = codes + o * g.row_bytes;
  if (f.packing == ops::WeightPacking::kBlock32Nibbles) {
    const uint8_t byte = codes[ops::quant_code_byte(f, g, o, (jp >> 5) * 16 + (jp & 15))];
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
  return static_cast<float>(static_cast<int8_t>(codes[ops::quant_code_byte(f, g, o, jp)]));
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
    const uint8_t* codes = static_cast<const uint8_t*>(w.data);
    const float* sc = static_cast<const float*>(w.scales) + (o / g.group_n) * g.groups_k;
    const float* zr = zeros ? static_cast<const float*>(w.zeros) + o * g.groups_k : nullptr;
    __nv_bfloat16* orow = out + o * k;
    for (int64_t j0 = static_cast<int64_t>(threadIdx.x) * 8; j0 < k; j0 += static_cast<int64_t>(blockDim.x) * 8) {
      const int64_t gk = j0 / g.group_k;  // 8 codes never straddle a group (group_k is a multiple of 32)
      const float s = sc[gk], z = zr ? zr[gk] : 0.f;
      if (vec) {
        __align__(16) __nv_bfloat16 v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) v[i] = __float2bfloat16(fmaf(s, code_value(f, g, codes, o, j0 + i), z));
        *reinterpret_cast<uint4*>(orow + j0) = *reinterpret_cast<const uint4*>(v);
      } else {
        for (int64_t jp = j0; jp < j0 + 8 && jp < k; ++jp)
          orow[perm ? w.k_perm[jp] : jp] = __float2bfloat16(fmaf(s, code_value(f, g, codes, o, jp), z));
      }
    }
  }
}

// kOutInTiles8 from row-major (ops/weight_format.h): 16-byte unit u of a slice of whole 8-row
// tiles, tile t = u / (8 C) (C = row_bytes / 16 chunks a row), at tile index i = u % (8 C):
// quad i / 32, row (i % 32) / 4, chunk 4 quad + i % 4 of that row in the source.
__global__ void quant_tiles8_kernel(uint4* dst, const uint4* src, int64_t units, int64_t chunks) {
  const int64_t per_tile = 8 * chunks;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = u / per_tile, i = u % per_tile;
    const int64_t quad = i / 32, r = (i % 32) / 4, c = 4 * quad + i % 4;
    dst[u] = src[t * per_tile + r * chunks + c];
  }
}

}  // namespace

cudaError_t launch_quant_tiles8_relayout(void* codes, int64_t n, int64_t row_bytes, void* tmp, size_t tmp_bytes,
                                        cudaStream_t stream) {
  const int64_t tile_bytes = 8 * row_bytes;
  if (n % 8 != 0 || row_bytes <= 0 || row_bytes % 64 != 0 || !tmp || static_cast<int64_t>(tmp_bytes) < tile_bytes)
    return cudaErrorInvalidValue;
  const int64_t tiles_per_slice = static_cast<int64_t>(tmp_bytes) / tile_bytes;
  auto* base = static_cast<uint8_t*>(codes);
  for (int64_t t0 = 0; t0 < n / 8; t0 += tiles_per_slice) {
    const int64_t bytes = std::min(tiles_per_slice, n / 8 - t0) * tile_bytes;
    uint8_t* slice = base + t0 * tile_bytes;
    if (const cudaError_t e = cudaMemcpyAsync(tmp, slice, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream);
        e != cudaSuccess)
      return e;
    const int64_t units = bytes / 16;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(units, 256), 132 * 16));
    quant_tiles8_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<uint4*>(slice), static_cast<const uint4*>(tmp), units,
                                                   row_bytes / 16);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

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
