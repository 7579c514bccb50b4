// Small-batch GEMV for decode: y[m, n] = x[m, k] @ w[n, k]^T (+ bias) (+= y), m = 1..8.
// Bandwidth-bound: every weight byte is read once for all m tokens. Each warp owns R weight
// rows; each lane streams 16-byte chunks of them (8 bf16) with loads that skip L1 so the small
// x rows, re-read by every warp, stay cached there. U chunks per lane are issued before any is
// used to keep enough bytes in flight to saturate HBM.
// With a SiluMulOut (SwiGLU's gate_up projection, rows [0, n/2) gates and [n/2, n) ups) a warp
// owns rows c and c + n/2 and its epilogue writes silu(gate) * up of channel c instead of y: the
// silu_mul kernel disappears from decode, for one silu per channel (a prologue in the down
// GEMV would recompute silu(x) in every warp, n times per element).
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace frugal::cuda {
namespace {

constexpr int kWarps = 4;

__device__ __forceinline__ void bf16x8_to_float(uint4 v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ float dot8(uint4 w, const float* x) {
  float wf[8];
  bf16x8_to_float(w, wf);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s = fmaf(wf[i], x[i], s);
  return s;
}

// kSilu: R == 2, the warp's rows are channel c's gate (c) and up (c + n / 2).
template <int M, int R, int U, bool kSilu>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(ops::MatmulParams p, SiluMulOut silu) {
  static_assert(!kSilu || R == 2, "the silu epilogue pairs a gate row with its up row");
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int64_t half = p.n / 2;
  const int64_t row0 = kSilu ? unit : unit * R;
  if (row0 >= (kSilu ? half : p.n)) return;
  const int64_t n_chunks = p.k / 8;
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(p.w.data);
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x);
  const __nv_bfloat16* wrow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t want = kSilu ? row0 + r * half : row0 + r;
    const int64_t row = want < p.n ? want : p.n - 1;  // clamp: loaded, never stored
    wrow[r] = w + row * p.k;
  }
  float acc[R][M] = {};
  for (int64_t base = lane; base < n_chunks; base += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = c < n_chunks ? load_stream16(wrow[r] + c * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= n_chunks) break;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + m * p.ld_x + c * 8)), xf);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][m] += dot8(wv[u][r], xf);
      }
    }
  }
  if constexpr (kSilu) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float g = warp_sum(acc[0][m]), u = warp_sum(acc[1][m]);
      if (lane == m % 32) {
        if (p.bias) {
          g += load_f(p.bias_dtype, p.bias, row0);
          u += load_f(p.bias_dtype, p.bias, row0 + half);
        }
        // gate and up as y would hold them, then silu_mul's expression.
        store_f(p.y_dtype, silu.out, m * silu.ld_out + row0, silu_mul_f(round_to(p.y_dtype, g), round_to(p.y_dtype, u)));
      }
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = warp_sum(acc[r][m]);
      const int64_t row = row0 + r;
      if (lane == (r * M + m) % 32 && row < p.n) {
        if (p.bias) v += load_f(p.bias_dtype, p.bias, row);
        if (p.accumulate) v += load_f(p.y_dtype, p.y, m * p.ld_y + row);
        store_f(p.y_dtype, p.y, m * p.ld_y + row, v);
      }
    }
  }
}

// Loads in flight per lane for m = 1 on matrices that fit in one wave of warps (qkv, o):
// there every warp's whole row is a few rounds of HBM latency, so more loads per round pay;
// FRUGAL_GEMV_U=4|8 overrides.
int small_matrix_u() {
  static int u = [] {
    const char* e = std::getenv("FRUGAL_GEMV_U");
    return e && std::atoi(e) == 4 ? 4 : 8;
  }();
  return u;
}

template <int M>
cudaError_t launch_m(const ops::MatmulParams& p, const SiluMulOut* silu, cudaStream_t stream) {
  // Two rows per warp halve the L1 traffic for x once it dominates (m >= 3).
  constexpr int R = M > 2 ? 2 : 1;
  constexpr int U = R == 1 ? 4 : 2;  // 8 per lane measured slower on the k = 18944 shape
  const bool small = M == 1 && p.n <= 8192 && p.k <= 8192 && small_matrix_u() == 8;
  if (silu) {  // two rows per warp always, with the loads in flight per lane of the plain kernel
    const unsigned grid = static_cast<unsigned>(ceil_div(p.n / 2, kWarps));
    if constexpr (M == 1) {
      if (small) return launch_kernel(gemv_kernel<M, 2, 4, true>, grid, kWarps * 32, 0, stream, p, *silu);
    }
    return launch_kernel(gemv_kernel<M, 2, R * U / 2, true>, grid, kWarps * 32, 0, stream, p, *silu);
  }
  const int64_t rows_per_block = kWarps * R;
  const unsigned grid = static_cast<unsigned>(ceil_div(p.n, rows_per_block));
  if constexpr (M == 1) {
    if (small) return launch_kernel(gemv_kernel<M, R, 8, false>, grid, kWarps * 32, 0, stream, p, SiluMulOut{});
  }
  return launch_kernel(gemv_kernel<M, R, U, false>, grid, kWarps * 32, 0, stream, p, SiluMulOut{});
}

// One warp per output element; lanes split k. For shapes and dtypes no fast path takes. Dense
// weights only (the backend dispatches formats before any launch).
__global__ void matmul_generic_kernel(ops::MatmulParams p) {
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t out = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (out >= p.m * p.n) return;
  const int64_t i = out / p.n, o = out % p.n;
  float acc = 0.f;
  for (int64_t j = lane; j < p.k; j += 32)
    acc += load_f(p.x_dtype, p.x, i * p.ld_x + j) * load_f(p.w.format.dtype, p.w.data, o * p.k + j);
  acc = warp_sum(acc);
  if (lane == 0) {
    if (p.bias) acc += load_f(p.bias_dtype, p.bias, o);
    if (p.accumulate) acc += load_f(p.y_dtype, p.y, i * p.ld_y + o);
    store_f(p.y_dtype, p.y, i * p.ld_y + o, acc);
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

bool gemv_supported(const ops::MatmulParams& p) {
  return p.m >= 1 && p.m <= kGemvMaxM && p.x_dtype == DType::kBF16 && p.w.format.scheme == ops::WeightScheme::kDense &&
         p.w.format.dtype == DType::kBF16 && p.k % 8 == 0 && p.ld_x % 8 == 0 && aligned16(p.x) && aligned16(p.w.data);
}

cudaError_t launch_gemv(const ops::MatmulParams& p, cudaStream_t stream, const SiluMulOut* silu) {
  if (p.n == 0) return cudaSuccess;
  if (silu && (p.n % 2 != 0 || p.accumulate)) return cudaErrorInvalidValue;
  switch (p.m) {
    case 1: return launch_m<1>(p, silu, stream);
    case 2: return launch_m<2>(p, silu, stream);
    case 3: return launch_m<3>(p, silu, stream);
    case 4: return launch_m<4>(p, silu, stream);
    case 5: return launch_m<5>(p, silu, stream);
    case 6: return launch_m<6>(p, silu, stream);
    case 7: return launch_m<7>(p, silu, stream);
    case 8: return launch_m<8>(p, silu, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_matmul_generic(const ops::MatmulParams& p, cudaStream_t stream) {
  if (p.m * p.n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = ceil_div(p.m * p.n * 32, threads);
  return launch_kernel(matmul_generic_kernel, static_cast<unsigned>(blocks), threads, 0, stream, p);
}

}  // namespace frugal::cuda
