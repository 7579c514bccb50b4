// FP8 W8A8 operands for cuBLASLt's FP8 GEMM (gemm_lt.h, LtGemm::run_fp8): the activations
// quantized to E4M3 on the fly with dynamic scales, and the weight's scales in the layout cuBLASLt
// reads. See kernels.h for the layouts.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_prologue.cuh"

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

// The vector forms of the two kernels above, for bf16 x with 16-byte aligned rows and k % 8 == 0
// (every projection of the models frugal runs): 16-byte loads, 8-byte stores, and the
// values rounded from registers, so x is read once. The codes and scales are bit for bit the
// ones the scalar kernels write (the same amax, the same 448 / amax, the same per-element
// E4M3 rounding). Profiled on 2026-12-03 (H200, 7B, 8192-token steps): the scalar per-token
// kernel took 485 us for the down projection's 8192 x 18944 input and 76 us for 8192 x 3584,
// 3-5x their bytes at the copy ceiling.
__device__ __forceinline__ float amax_bf16x8(const uint4& v) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  __nv_bfloat162 m = __habs2(h[0]);
#pragma unroll
  for (int i = 1; i < 4; ++i) m = __hmax2(m, __habs2(h[i]));
  return fmaxf(__bfloat162float(m.x), __bfloat162float(m.y));
}

__device__ __forceinline__ uint2 e4m3x8(const uint4& v, float inv) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  uint32_t w[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 a = __bfloat1622float2(h[2 * i]), b = __bfloat1622float2(h[2 * i + 1]);
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a.x * inv, a.y * inv), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(b.x * inv, b.y * inv), __NV_SATFINITE, __NV_E4M3);
    w[i] = lo | (hi << 16);
  }
  return make_uint2(w[0], w[1]);
}

// silu_mul of 8 bf16 gate and up values, rounded to bf16 as the silu_mul kernel stores them
// (silu_mul_f, round to nearest even).
__device__ __forceinline__ uint4 silu_mul_bf16x8(const uint4& g, const uint4& u) {
  const auto* g2 = reinterpret_cast<const __nv_bfloat162*>(&g);
  const auto* u2 = reinterpret_cast<const __nv_bfloat162*>(&u);
  uint4 o;
  auto* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(g2[i]), b = __bfloat1622float2(u2[i]);
    o2[i] = __floats2bfloat162_rn(silu_mul_f(a.x, b.x), silu_mul_f(a.y, b.y));
  }
  return o;
}

// Where the vector kernels' 8 bf16 inputs come from: a row of x, or silu(gate) * up computed
// on the fly (silu_mul_matmul: the product is never written; its values are bit for bit the
// silu_mul kernel's bf16 outputs, so the codes and scales equal those of the sequence).
struct RowSource {
  const __nv_bfloat16* x;
  int64_t ld;
  __device__ __forceinline__ uint4 load(int64_t t, int64_t j8) const {
    return *reinterpret_cast<const uint4*>(x + t * ld + j8 * 8);
  }
};
struct SiluSource {
  const __nv_bfloat16* gate;
  const __nv_bfloat16* up;
  int64_t ld_gate, ld_up;
  __device__ __forceinline__ uint4 load(int64_t t, int64_t j8) const {
    return silu_mul_bf16x8(*reinterpret_cast<const uint4*>(gate + t * ld_gate + j8 * 8),
                           *reinterpret_cast<const uint4*>(up + t * ld_up + j8 * 8));
  }
};

// Per token: one block per token row, V 16-byte vectors per thread held in registers.
constexpr int kVecThreads = 512;
template <int V, typename Src>
__global__ void __launch_bounds__(kVecThreads) quantize_fp8_per_token_vec_kernel(Src src, int64_t k, int64_t k_pad,
                                                                                  uint8_t* xq, float* xs) {
  pdl_wait();
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const int nv = static_cast<int>(k / 8);
  uint4 v[V];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int j = threadIdx.x + i * kVecThreads;
    v[i] = j < nv ? src.load(t, j) : make_uint4(0, 0, 0, 0);
    amax = fmaxf(amax, amax_bf16x8(v[i]));
  }
  amax = block_max(amax, red);
  const float inv = amax > 0.f ? kE4m3Max / amax : 0.f;
  auto* out = reinterpret_cast<uint2*>(xq + t * k_pad);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int j = threadIdx.x + i * kVecThreads;
    if (j < nv) out[j] = e4m3x8(v[i], inv);
  }
  for (int64_t j = k + threadIdx.x; j < k_pad; j += kVecThreads) xq[t * k_pad + j] = 0;
  if (threadIdx.x == 0) xs[t] = amax / kE4m3Max;
}

// Per token and 128 inputs: 16 lanes per (token, 128-block), one 16-byte vector each.
template <typename Src>
__global__ void quantize_fp8_per_128_vec_kernel(Src src, int64_t m, int64_t k, int64_t k_pad, uint8_t* xq, float* xs,
                                                int64_t ld_s) {
  pdl_wait();
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 4;
  const int lane = threadIdx.x & 15;
  const int64_t kb = ceil_div(k_pad, 128);
  // Every lane of the warp stays to the shuffles (a half past the last item loads nothing).
  const bool live = item < m * kb;
  const int64_t t = live ? item / kb : 0, b = live ? item % kb : 0;
  const int64_t j = b * 128 + 8 * lane;
  const uint4 v = live && j < k ? src.load(t, j / 8) : make_uint4(0, 0, 0, 0);
  float amax = amax_bf16x8(v);
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o, 16));
  if (!live) return;
  const float inv = amax > 0.f ? kE4m3Max / amax : 0.f;
  if (j < k_pad) *reinterpret_cast<uint2*>(xq + t * k_pad + j) = e4m3x8(v, inv);
  if (lane == 0) xs[b * ld_s + t] = amax / kE4m3Max;
}

// rms_norm then the FP8 quantization of its bf16 output (rms_norm_matmul's W8A8 path), one block
// per token row: the row normalized into shared memory with rms_norm's bits (norm_prologue.cuh,
// rows of up to 4096), then the per-token or per-128 amax, scale and E4M3 codes the kernels above
// write for that bf16 row. The normalized row itself is never written.
constexpr int kNormQuantThreads = 128;
__global__ void __launch_bounds__(kNormQuantThreads) quantize_fp8_norm_kernel(RowNorm norm, int64_t ld_x, int64_t k, int64_t k_pad,
                                                                               bool per_128, uint8_t* xq, float* xs, int64_t ld_s) {
  __shared__ uint4 row[kNormMaxVec];
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  pdl_wait();
  RowNorm n = norm;
  n.x = norm.x + t * ld_x;
  norm_prologue<kNormQuantThreads>(n, row, red, false);
  const int nv = static_cast<int>(k / 8);
  if (!per_128) {
    float amax = 0.f;
    for (int j = threadIdx.x; j < nv; j += kNormQuantThreads) amax = fmaxf(amax, amax_bf16x8(row[j]));
    amax = block_max(amax, red);
    const float inv = amax > 0.f ? kE4m3Max / amax : 0.f;
    auto* out = reinterpret_cast<uint2*>(xq + t * k_pad);
    for (int j = threadIdx.x; j < nv; j += kNormQuantThreads) out[j] = e4m3x8(row[j], inv);
    for (int64_t j = k + threadIdx.x; j < k_pad; j += kNormQuantThreads) xq[t * k_pad + j] = 0;
    if (threadIdx.x == 0) xs[t] = amax / kE4m3Max;
    return;
  }
  // Per 128 inputs: thread b takes block b's 16 vectors (zeros past k, as the vector kernel loads).
  const int64_t kb = ceil_div(k_pad, 128);
  for (int64_t b = threadIdx.x; b < kb; b += kNormQuantThreads) {
    float amax = 0.f;
    for (int i = 0; i < 16; ++i) {
      const int64_t j8 = b * 16 + i;
      if (j8 < nv) amax = fmaxf(amax, amax_bf16x8(row[j8]));
    }
    const float inv = amax > 0.f ? kE4m3Max / amax : 0.f;
    for (int i = 0; i < 16; ++i) {
      const int64_t j8 = b * 16 + i;
      if (j8 * 8 < k_pad)
        *reinterpret_cast<uint2*>(xq + t * k_pad + j8 * 8) = e4m3x8(j8 < nv ? row[j8] : make_uint4(0, 0, 0, 0), inv);
    }
    xs[b * ld_s + t] = amax / kE4m3Max;
  }
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

// The vector kernels from src; cudaErrorNotSupported where they do not apply (a per-token row
// longer than 8 vectors a thread).
template <typename Src>
cudaError_t launch_quantize_vec(const Src& src, int64_t m, int64_t k, int64_t k_pad, bool per_128, uint8_t* xq,
                                float* xs, int64_t ld_s, cudaStream_t stream) {
  if (per_128) {
    const int threads = 256;
    const int64_t lanes = m * ceil_div(k_pad, 128) * 16;
    return launch_kernel(quantize_fp8_per_128_vec_kernel<Src>, static_cast<unsigned>(ceil_div(lanes, threads)), threads,
                         0, stream, src, m, k, k_pad, xq, xs, ld_s);
  }
  // V vectors of 8 per thread: rows of up to 8 x 4096 inputs (the 7B down projection: 18944).
  const int64_t v = ceil_div(k / 8, kVecThreads);
  auto* kernel = v <= 1 ? quantize_fp8_per_token_vec_kernel<1, Src>
                 : v == 2 ? quantize_fp8_per_token_vec_kernel<2, Src>
                 : v <= 4 ? quantize_fp8_per_token_vec_kernel<4, Src>
                 : v <= 8 ? quantize_fp8_per_token_vec_kernel<8, Src> : nullptr;
  if (kernel == nullptr) return cudaErrorNotSupported;
  return launch_kernel(kernel, static_cast<unsigned>(m), kVecThreads, 0, stream, src, k, k_pad, xq, xs);
}

bool vec_rows(const void* p, int64_t ld) { return ld % 8 == 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

cudaError_t launch_quantize_fp8_act(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k, int64_t k_pad,
                                    bool per_128, uint8_t* xq, float* xs, int64_t ld_s, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (x_dtype == DType::kBF16 && k % 8 == 0 && k_pad % 8 == 0 && vec_rows(x, ld_x)) {
    // Longer per-token rows than the vector kernel holds take the scalar kernel.
    const cudaError_t e = launch_quantize_vec(RowSource{static_cast<const __nv_bfloat16*>(x), ld_x}, m, k, k_pad, per_128,
                                              xq, xs, ld_s, stream);
    if (e != cudaErrorNotSupported) return e;
  }
  if (!per_128)
    return launch_kernel(quantize_fp8_per_token_kernel, static_cast<unsigned>(m), 256, 0, stream, x, x_dtype, ld_x, k,
                         k_pad, xq, xs);
  const int threads = 256;
  const int64_t warps = m * ceil_div(k_pad, 128);
  return launch_kernel(quantize_fp8_per_128_kernel, static_cast<unsigned>(ceil_div(warps * 32, threads)), threads, 0,
                       stream, x, x_dtype, ld_x, m, k, k_pad, xq, xs, ld_s);
}

cudaError_t launch_quantize_fp8_silu(const FusedSiluQuant& f, int64_t m, int64_t k, int64_t k_pad, bool per_128,
                                     uint8_t* xq, float* xs, int64_t ld_s, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  if (k % 8 != 0 || k_pad % 8 != 0 || !vec_rows(f.gate, f.ld_gate) || !vec_rows(f.up, f.ld_up)) return cudaErrorNotSupported;
  const SiluSource src{static_cast<const __nv_bfloat16*>(f.gate), static_cast<const __nv_bfloat16*>(f.up), f.ld_gate, f.ld_up};
  return launch_quantize_vec(src, m, k, k_pad, per_128, xq, xs, ld_s, stream);
}

cudaError_t launch_quantize_fp8_norm(const ops::RmsNormParams& n, int64_t k_pad, bool per_128, uint8_t* xq, float* xs,
                                     int64_t ld_s, cudaStream_t stream) {
  if (n.rows == 0) return cudaSuccess;
  // What rms_norm runs with rms_norm_bf16_kernel at one vector a thread, on rows the norm prologue holds.
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (n.act_dtype != DType::kBF16 || n.weight_dtype != DType::kBF16 || n.residual != nullptr || n.dim % 8 != 0 ||
      n.dim > 8 * kNormMaxVec || k_pad % 8 != 0 || k_pad < n.dim || n.ld_x % 8 != 0 || n.ld_y % 8 != 0 || !a16(n.x) ||
      !a16(n.y) || !a16(n.weight) || n.rows > 0x7fffffff)
    return cudaErrorNotSupported;
  const RowNorm norm{.x = static_cast<const __nv_bfloat16*>(n.x), .y = nullptr,
                     .w = static_cast<const __nv_bfloat16*>(n.weight), .dim = static_cast<int>(n.dim), .eps = n.eps};
  return launch_kernel(quantize_fp8_norm_kernel, static_cast<unsigned>(n.rows), kNormQuantThreads, 0, stream, norm, n.ld_x,
                       n.dim, k_pad, per_128, xq, xs, ld_s);
}

cudaError_t launch_fp8_weight_scales(const float* s, int64_t rows, int64_t cols, int64_t ld_out, bool broadcast,
                                     float* out, cudaStream_t stream) {
  const int64_t total = rows * ld_out;
  if (total == 0) return cudaSuccess;
  return launch_kernel(fp8_weight_scales_kernel, static_cast<unsigned>(ceil_div(total, 256)), 256, 0, stream, s, rows,
                       cols, ld_out, broadcast, out);
}

}  // namespace frugal::cuda
