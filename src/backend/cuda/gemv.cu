// Small-batch GEMV for decode: y[m, n] = x[m, k] @ w[n, k]^T (+ bias) (+= y), m = 1..8.
// Bandwidth-bound: every weight byte is read once for all m tokens. Each warp owns R weight
// rows; each lane streams 16-byte chunks of them (8 bf16) with loads that skip L1 so the small
// x rows, re-read by every warp, stay cached there. U chunks per lane are issued before any is
// used to keep enough bytes in flight to saturate HBM. Matrices with few, long rows split each
// row's k over 2-4 warps of a block (split_k), to put more warps and bytes in flight.
// With a SiluMulOut (SwiGLU's gate_up projection, rows [0, n/2) gates and [n/2, n) ups) a warp
// owns rows c and c + n/2 and its epilogue writes silu(gate) * up of channel c instead of y: the
// silu_mul kernel disappears from decode, for one silu per channel (a prologue in the down
// GEMV would recompute silu(x) in every warp, n times per element).
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/norm_prologue.cuh"

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

// One round of weight loads: U chunks (16 bytes) per lane of each of the warp's R rows, from
// chunk `base` on in steps of 32; chunks at or past `end` load zeros (never used).
template <int R, int U>
__device__ __forceinline__ void load_round(uint4 (&wv)[U][R], const __nv_bfloat16* const (&wrow)[R], int64_t base,
                                           int64_t end) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = base + 32 * u;
#pragma unroll
    for (int r = 0; r < R; ++r) wv[u][r] = c < end ? load_stream16(wrow[r] + c * 8) : make_uint4(0, 0, 0, 0);
  }
}

// Accumulates one round (U chunks from `base` in steps of 32, those before `end`) of the rows in wv.
template <int M, int R, int U>
__device__ __forceinline__ void dot_round(float (&acc)[R][M], const uint4 (&wv)[U][R], const __nv_bfloat16* x,
                                          int64_t ld_x, int64_t base, int64_t end) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = base + 32 * u;
    if (c >= end) break;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xf[8];
      bf16x8_to_float(__ldg(reinterpret_cast<const uint4*>(x + m * ld_x + c * 8)), xf);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][m] += dot8(wv[u][r], xf);
    }
  }
}

// The same round with x from shared memory (the fused norm's normalized row; M == 1).
template <int R, int U>
__device__ __forceinline__ void dot_round_smem(float (&acc)[R][1], const uint4 (&wv)[U][R], const uint4* xs, int64_t base,
                                               int64_t end) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = base + 32 * u;
    if (c >= end) break;
    float xf[8];
    bf16x8_to_float(xs[c], xf);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][0] += dot8(wv[u][r], xf);
  }
}

// kSilu: R == 2, the warp's rows are channel c's gate (c) and up (c + n / 2).
// S: warps that split each row's k (1, 2 or 4; a block of kWarps warps owns kWarps / S row
// groups). Split s takes the s-th contiguous range of chunks (whole rounds of 32 chunks, only
// the last range shorter); each lane accumulates its chunks in ascending order, the
// warp sums its lanes (warp_sum), and split 0 adds the S warp totals in split order through
// shared memory: one fixed order per (n, k, S), whatever M, R and U, and no atomics. S = 1 is the
// unsplit kernel, bit for bit.
// kEarly: the first round of weight loads is issued before pdl_wait(), overlapping the previous
// kernel's tail. Legal because no kernel writes a GEMV's weights (they are loaded once, from the
// host); x, y and bias are read only after the wait (launch_gemv's contract, kernels.h). Without
// it pdl_wait() comes first, as it always did (that order also keeps the address arithmetic out of
// the registers live across the wait: 32 registers instead of 38 at m = 1).
// A split m = 1 kernel at 4 loads per lane is held to 32 registers (16 blocks, the SM's 64 warps):
// 38 would leave 48 warps per SM, and the split down projection (n * S = 7168 warps) would run
// a second, nearly empty wave.
// The fused-norm kernel is held to the plain m = 1 kernel's 56 registers (9 blocks a SM): the 7B
// qkv projection's 1,152 blocks then still fit one wave.
template <int M, int U, int S, bool kNorm = false>
constexpr int kMinBlocks = kNorm ? 9 : M == 1 && U <= 4 && S > 1 ? 16 : 0;  // 0: no minimum

// kNorm (rms_norm_matmul, m = 1 on the early-load path): x is the norm's output, computed by
// norm_prologue (norm_prologue.cuh; block 0 also writes it to nrm.y) after the wait; every warp
// stays for its barriers (rows past n are clamped, loaded and never stored).
template <int M, int R, int U, bool kSilu, int S, bool kEarly, bool kNorm = false>
__global__ void __launch_bounds__(kWarps * 32, (kMinBlocks<M, U, S, kNorm>)) gemv_kernel(ops::MatmulParams p, SiluMulOut silu,
                                                                                          RowNorm nrm) {
  static_assert(!kSilu || R == 2, "the silu epilogue pairs a gate row with its up row");
  static_assert(!kNorm || (M == 1 && S == 1 && kEarly && !kSilu), "the fused norm: m = 1, early loads, unsplit");
  static_assert(S == 1 || S == 2 || S == 4, "a block's warps split k 1, 2 or 4 ways");
  if constexpr (!kEarly) pdl_wait();
  constexpr int kGroups = kWarps / S;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = warp % S;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * kGroups + warp / S;
  const int64_t half = p.n / 2;
  const int64_t row0 = kSilu ? unit : unit * R;
  const bool active = row0 < (kSilu ? half : p.n);
  if constexpr (S == 1 && !kNorm) {
    if (!active) {
      if constexpr (kEarly) pdl_wait();  // still lets the dependents launch
      return;
    }
  }
  const int64_t n_chunks = p.k / 8;
  int64_t c_begin = 0, c_end = n_chunks;
  if constexpr (S > 1) {
    const int64_t per_split = ceil_div(ceil_div(n_chunks, S), 32) * 32;
    c_begin = active ? std::min(n_chunks, split * per_split) : n_chunks;  // idle warps: no chunks
    c_end = std::min(n_chunks, c_begin + per_split);
  }
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
  int64_t base = c_begin + lane;
  // kPre (the early-load kernels: qkv and o at m = 1, a few rounds of latency long): the
  // epilogue's operands (bias, and y when accumulating) are loaded up front by the lane that
  // stores them (lane r * M + m, one (r, m) a lane: R * M <= 32), the bias before pdl_wait (no
  // kernel writes it) and y right after, so their latency hides under the weight stream instead
  // of following the reduction. Elsewhere they stay in the epilogue (the 32-register kernels
  // would lose occupancy or spill).
  constexpr bool kPre = kEarly && S == 1;
  static_assert(R * M <= 32, "one output of the warp per lane");
  const int er = lane / M, em = lane % M;
  const int64_t erow = kSilu ? row0 : row0 + er;
  const bool stores = kPre && lane < R * M && erow < p.n && (!kSilu || er == 0);
  float pre_bias = 0.f, pre_bias2 = 0.f, pre_y = 0.f;
  if (stores && p.bias) {
    pre_bias = load_f(p.bias_dtype, p.bias, erow);
    if constexpr (kSilu) pre_bias2 = load_f(p.bias_dtype, p.bias, erow + half);
  }
  [[maybe_unused]] uint4* xs = nullptr;  // kNorm: the normalized row
  if constexpr (kEarly) {
    uint4 wv[U][R];
    load_round<R, U>(wv, wrow, base, c_end);
    if constexpr (kNorm) {
      __shared__ uint4 xs_buf[kNormMaxVec];
      __shared__ float red[32];
      xs = xs_buf;
      pdl_wait();
      norm_prologue<kWarps * 32>(nrm, xs, red, blockIdx.x == 0);
    } else {
      pdl_wait();
    }
    if (stores && p.accumulate) pre_y = load_f(p.y_dtype, p.y, em * p.ld_y + erow);
    if constexpr (kNorm) dot_round_smem<R, U>(acc, wv, xs, base, c_end);
    else dot_round<M, R, U>(acc, wv, x, p.ld_x, base, c_end);
    base += 32 * U;
  }
  for (; base < c_end; base += 32 * U) {
    uint4 wv[U][R];
    load_round<R, U>(wv, wrow, base, c_end);
    if constexpr (kNorm) dot_round_smem<R, U>(acc, wv, xs, base, c_end);
    else dot_round<M, R, U>(acc, wv, x, p.ld_x, base, c_end);
  }
  float tot[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) tot[r][m] = warp_sum(acc[r][m]);
  if constexpr (S > 1) {
    __shared__ float part[kWarps][R * M];
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < R * M; ++i) part[warp][i] = tot[i / M][i % M];
    }
    __syncthreads();
    if (split != 0 || !active) return;
#pragma unroll
    for (int i = 0; i < R * M; ++i) {
      float v = part[warp][i];
#pragma unroll
      for (int s = 1; s < S; ++s) v += part[warp + s][i];
      tot[i / M][i % M] = v;
    }
  }
  if constexpr (kSilu) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float g = tot[0][m], u = tot[1][m];
      if (lane == m % 32) {
        if (p.bias) {
          g += kPre ? pre_bias : load_f(p.bias_dtype, p.bias, row0);
          u += kPre ? pre_bias2 : load_f(p.bias_dtype, p.bias, row0 + half);
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
      float v = tot[r][m];
      const int64_t row = row0 + r;
      if (lane == (r * M + m) % 32 && row < p.n) {
        if (p.bias) v += kPre ? pre_bias : load_f(p.bias_dtype, p.bias, row);
        if (p.accumulate) v += kPre ? pre_y : load_f(p.y_dtype, p.y, m * p.ld_y + row);
        store_f(p.y_dtype, p.y, m * p.ld_y + row, v);
      }
    }
  }
}

int env_or(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

// Loads in flight per lane for m = 1 on matrices that fit in one wave of warps (qkv, o):
// there every warp's whole row is a few rounds of HBM latency, so more loads per round pay;
// FRUGAL_GEMV_U=4|8 overrides.
int small_matrix_u() {
  static int u = env_or("FRUGAL_GEMV_U", 8) == 4 ? 4 : 8;
  return u;
}

// Early weight loads (before pdl_wait) at m = 1: 1 on the small-matrix path (qkv, o: the kernels
// that follow the short rms_norm / attention kernels and are a few rounds of latency long), 2
// also on the unsplit 4-loads-a-lane path (gate_up, lm_head and an unsplit down: the first wave
// of blocks starts its weight stream under the previous kernel's tail; 40 registers there
// instead of 32). Split kernels never load early (held to 32 registers, they would spill).
// FRUGAL_GEMV_EARLY=0 | 1 | 2 (default 1: 2 measured no faster on the H200, batch-1 decode
// 240.7 against 240.1 tok/s, at a 32k context 209.0 against 209.8); set_gemv_tuning wins.
int g_tune_split = -1, g_tune_early = -1;
int early_loads() {
  static const int env = std::clamp(env_or("FRUGAL_GEMV_EARLY", 1), 0, 2);
  return g_tune_early >= 0 ? std::min(g_tune_early, 2) : env;
}

int sm_count() {
  static const int n = [] {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 132;
    return sms;
  }();
  return n;
}

// Warps splitting each row's k, from the shape alone (never from m: every m = 1..8 of a shape
// sums in one order, so a token's row does not depend on the batch it is decoded in). Long rows
// on few rows: the down projection (n = 3584, k = 18944) had one warp per row, 27 of the 64 a
// SM holds, each streaming 37.9 KB with 4 loads per lane in flight: latency bound at 69% of the
// copy ceiling. Splitting k 2 ways doubles the warps (and bytes in flight) while the grid still
// fits in one wave (n * S <= 64 warps per SM); each split keeps >= 16 chunks per lane (k / S >=
// 4096) so the reduction stays a small share. Matrices with enough rows (gate_up, lm_head) or
// short rows (qkv, o: k = 3584) stay unsplit. FRUGAL_GEMV_SPLITK=0|1 keeps the unsplit kernel
// everywhere, =2|4 forces that split on every shape (A/B runs, tests); set_gemv_tuning wins.
int split_k(int64_t n, int64_t k) {
  static const int env = env_or("FRUGAL_GEMV_SPLITK", -1);
  const int force = g_tune_split >= 0 ? g_tune_split : env;
  if (force >= 0) return force >= 4 ? 4 : force >= 2 ? 2 : 1;
  const int64_t max_warps = int64_t{sm_count()} * 64;
  int s = 1;
  while (s < 4 && n * s * 2 <= max_warps && k / (s * 2) >= 4096) s *= 2;
  return s;
}

// s warps per row (split_k; the silu epilogue always 1).
template <int M, int R, int U, bool kSilu, bool kEarly = false>
cudaError_t launch_split(const ops::MatmulParams& p, const SiluMulOut& silu, int s, cudaStream_t stream) {
  const int64_t units = kSilu ? p.n / 2 : ceil_div(p.n, R);  // warp row groups
  const auto grid = [&](int groups) { return static_cast<unsigned>(ceil_div(units, groups)); };
  if constexpr (!kSilu) {
    if (s == 2)
      return launch_kernel(gemv_kernel<M, R, U, false, 2, kEarly>, grid(kWarps / 2), kWarps * 32, 0, stream, p, silu, RowNorm{});
    if (s == 4) return launch_kernel(gemv_kernel<M, R, U, false, 4, kEarly>, grid(1), kWarps * 32, 0, stream, p, silu, RowNorm{});
  }
  return launch_kernel(gemv_kernel<M, R, U, kSilu, 1, kEarly>, grid(kWarps), kWarps * 32, 0, stream, p, silu, RowNorm{});
}

template <int M>
cudaError_t launch_m(const ops::MatmulParams& p, const SiluMulOut* silu, cudaStream_t stream) {
  // Two rows per warp halve the L1 traffic for x once it dominates (m >= 3).
  constexpr int R = M > 2 ? 2 : 1;
  constexpr int U = R == 1 ? 4 : 2;  // 8 per lane measured slower on the k = 18944 shape
  const bool small = M == 1 && p.n <= 8192 && p.k <= 8192 && small_matrix_u() == 8;
  if (silu) {  // two rows per warp always, with the loads in flight per lane of the plain kernel; unsplit
               // (gate_up's 18944 channels are warps enough)
    if constexpr (M == 1) {
      if (small) return launch_split<M, 2, 4, true>(p, *silu, 1, stream);
    }
    return launch_split<M, 2, R * U / 2, true>(p, *silu, 1, stream);
  }
  const int s = split_k(p.n, p.k);
  if constexpr (M == 1) {
    if (small) {
      if (early_loads() >= 1) return launch_split<M, R, 8, false, true>(p, SiluMulOut{}, s, stream);
      return launch_split<M, R, 8, false>(p, SiluMulOut{}, s, stream);
    }
    if (early_loads() == 2 && s == 1) return launch_split<M, R, U, false, true>(p, SiluMulOut{}, 1, stream);
  }
  return launch_split<M, R, U, false>(p, SiluMulOut{}, s, stream);
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

void set_gemv_tuning(int split, int early) {
  g_tune_split = split;
  g_tune_early = early;
}

int gemv_split_k(int64_t n, int64_t k) { return split_k(n, k); }

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

// The GEMV rms_norm_matmul's matmul would take at m = 1 (launch_m<1>'s small-matrix early-load
// kernel, unsplit), over a bf16 norm rms_norm runs with rms_norm_bf16_kernel of one vector a thread.
bool rms_norm_gemv_fusable(const ops::RmsNormMatmulParams& p) {
  const ops::RmsNormParams& n = p.norm;
  const ops::MatmulParams& mm = p.mm;
  const auto* xb = static_cast<const uint8_t*>(n.x);
  const auto* yb = static_cast<const uint8_t*>(n.y);
  const int64_t row_bytes = n.dim * 2;
  return n.rows == 1 && mm.m == 1 && n.act_dtype == DType::kBF16 && n.weight_dtype == DType::kBF16 &&
         n.residual == nullptr && n.dim == mm.k && n.dim % 8 == 0 && n.dim <= 8 * kNormMaxVec && mm.x == n.y &&
         n.ld_x % 8 == 0 && n.ld_y % 8 == 0 &&
         aligned16(n.x) && aligned16(n.y) && aligned16(n.weight) && (xb + row_bytes <= yb || yb + row_bytes <= xb) &&
         gemv_supported(mm) && mm.n <= 8192 && mm.k <= 8192 && small_matrix_u() == 8 && early_loads() >= 1 &&
         split_k(mm.n, mm.k) == 1;
}

cudaError_t launch_rms_norm_gemv(const ops::RmsNormMatmulParams& p, cudaStream_t stream) {
  if (p.mm.n == 0) return cudaSuccess;
  const RowNorm nrm{.x = static_cast<const __nv_bfloat16*>(p.norm.x), .y = static_cast<__nv_bfloat16*>(p.norm.y),
                     .w = static_cast<const __nv_bfloat16*>(p.norm.weight), .dim = static_cast<int>(p.norm.dim),
                     .eps = p.norm.eps};
  return launch_kernel(gemv_kernel<1, 1, 8, false, 1, true, true>, static_cast<unsigned>(ceil_div(p.mm.n, kWarps)), kWarps * 32,
                       0, stream, p.mm, SiluMulOut{}, nrm);
}

cudaError_t launch_matmul_generic(const ops::MatmulParams& p, cudaStream_t stream) {
  if (p.m * p.n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = ceil_div(p.m * p.n * 32, threads);
  return launch_kernel(matmul_generic_kernel, static_cast<unsigned>(blocks), threads, 0, stream, p);
}

}  // namespace frugal::cuda
