// Multi-head latent attention on CUDA (DeepSeek):
//  - the per-head matmuls of weight absorption as one batched GEMV launch for decode-sized m
//    (ops::BatchedMatmulParams; larger m is one strided-batched cuBLASLt matmul, cuda_backend.cpp);
//  - attention over the latent cache: one shared KV head whose K and V are the same
//    [kv_lora_rank + rope] row (MQA with K == V, head_dim up to 640), every query head of a
//    group of 16 against each cache row loaded once into shared memory, split over the context
//    for small batches (f32 partials merged by the last block of each (token, head group) to
//    finish, or by a second kernel). One block per query token,
//    so decode tokens and prefill chunks (each token causal over its own prefix) take the same
//    kernel; the generic attention kernel, one block per (token, head) re-reading every 576-wide
//    row, was 7 ms a layer for a 512-token V2-Lite prefill. At head_dim 576 the same blocks run
//    on the tensor cores (mla_decode_mma_kernel below; FRUGAL_MLA_MMA=0 keeps the CUDA-core
//    kernel, which took 160 us a layer of a 256-sequence V2-Lite decode step on the H200, ~10x
//    its bandwidth bound).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_combine.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mla_prologue.cuh"
#include "backend/cuda/mma.cuh"

namespace frugal::cuda {
namespace {

constexpr int kWarps = 8;

// The batched GEMV's bf16 arithmetic, shared with the fused W_UV below so both give the same
// bits: acc[r][i] += kRows rows of w (k long, bf16) against the inputs x_at(i, j) (16-byte loads
// of bf16) for i < m, each lane its 8-wide chunks in order of k, pair by pair, kU chunks of a row
// in flight. rows_load_round loads one round of a lane's chunks (from j0 = lane * 8 + 256 kU i);
// rows_dot_bf16_from takes the first round already loaded into wv (a kernel may load it before
// its PDL wait: the rows are weights, which no kernel writes), rows_dot_bf16 loads it itself.
template <int kRows, int kU>
__device__ __forceinline__ void rows_load_round(const __nv_bfloat16* const (&w)[kRows], int64_t k, int64_t j0,
                                                uint4 (&wv)[kU][kRows]) {
#pragma unroll
  for (int u = 0; u < kU; ++u)
#pragma unroll
    for (int r = 0; r < kRows; ++r) wv[u][r] = j0 + 256 * u < k ? load_stream16(w[r] + j0 + 256 * u) : make_uint4(0, 0, 0, 0);
}

// One round (chunks j0 + 256 u) of loaded rows against the inputs.
template <int kRows, int kU, int kMaxM, typename XAt>
__device__ __forceinline__ void rows_dot_round(const uint4 (&wv)[kU][kRows], int64_t k, int64_t m, int64_t j0, XAt x_at,
                                               float (&acc)[kRows][kMaxM]) {
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const int64_t j = j0 + 256 * u;
    if (j >= k) break;
#pragma unroll
    for (int i = 0; i < kMaxM; ++i) {
      if (i >= m) break;
      const uint4 xv = x_at(i, j);
      const auto* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const auto* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv[u][r]);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float2 wf = __bfloat1622float2(w2[q]), f = __bfloat1622float2(x2[q]);
          acc[r][i] += wf.x * f.x + wf.y * f.y;
        }
      }
    }
  }
}

template <int kRows, int kU, int kMaxM, typename XAt>
__device__ __forceinline__ void rows_dot_bf16_from(const __nv_bfloat16* const (&w)[kRows], int64_t k, int64_t m, XAt x_at,
                                                   uint4 (&wv)[kU][kRows], float (&acc)[kRows][kMaxM]) {
  const int lane = threadIdx.x % 32;
  for (int64_t j0 = lane * 8; j0 < k; j0 += 32 * 8 * kU) {
    if (j0 != lane * 8) rows_load_round<kRows, kU>(w, k, j0, wv);
    rows_dot_round<kRows, kU>(wv, k, m, j0, x_at, acc);
  }
}

template <int kRows, int kU, int kMaxM, typename XAt>
__device__ __forceinline__ void rows_dot_bf16(const __nv_bfloat16* const (&w)[kRows], int64_t k, int64_t m, XAt x_at,
                                              float (&acc)[kRows][kMaxM]) {
  const int lane = threadIdx.x % 32;
  for (int64_t j0 = lane * 8; j0 < k; j0 += 32 * 8 * kU) {
    uint4 wv[kU][kRows];
    rows_load_round<kRows, kU>(w, k, j0, wv);
    rows_dot_round<kRows, kU>(wv, k, m, j0, x_at, acc);
  }
}

// Whether the batched GEMV takes its 16-byte path for p (the fused W_UV requires it).
__host__ __device__ __forceinline__ bool batched_gemv_vec(const ops::BatchedMatmulParams& p) {
  return p.w_dtype == DType::kBF16 && p.x_dtype == DType::kBF16 && p.k % 8 == 0 && p.ld_x % 8 == 0 &&
         p.stride_x % 8 == 0 && p.stride_w % 8 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
}

// The bf16 GEMV of one warp: rows o0 .. o0 + kRows of batch entry b of p.w (rows p.k apart; rows
// past n_rows read row n_rows - 1, never stored) over their first k_dot columns, against x[b]'s
// rows i < p.m, into acc. kEarly: the first round of weight chunks is loaded before pdl_wait()
// (the caller has not waited yet); else the caller has waited.
template <int kRows, int kU, int kMaxM, bool kEarly>
__device__ __forceinline__ void batched_rows_bf16(const ops::BatchedMatmulParams& p, int64_t b, int64_t o0, int64_t n_rows,
                                                  int64_t k_dot, float (&acc)[kRows][kMaxM]) {
  const __nv_bfloat16* w[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    w[r] = static_cast<const __nv_bfloat16*>(p.w) + b * p.stride_w + min(o0 + r, n_rows - 1) * p.k;
  const auto* x = static_cast<const __nv_bfloat16*>(p.x) + b * p.stride_x;
  const auto x_at = [&](int i, int64_t j) { return *reinterpret_cast<const uint4*>(x + i * p.ld_x + j); };
  if constexpr (kEarly) {
    uint4 wv[kU][kRows];
    rows_load_round<kRows, kU>(w, k_dot, (threadIdx.x % 32) * 8, wv);
    pdl_wait();
    rows_dot_bf16_from<kRows, kU>(w, k_dot, p.m, x_at, wv, acc);
  } else {
    rows_dot_bf16<kRows, kU>(w, k_dot, p.m, x_at, acc);
  }
}

// acc's rows o0 + r < n_rows of tokens i < p.m, each warp-summed, into y[y_base + i * ld_y + o0 + r].
template <int kRows, int kMaxM>
__device__ __forceinline__ void batched_rows_store(const ops::BatchedMatmulParams& p, int64_t y_base, int64_t o0, int64_t n_rows,
                                                   const float (&acc)[kRows][kMaxM]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (o0 + r >= n_rows) break;
#pragma unroll
    for (int i = 0; i < kMaxM; ++i) {
      if (i >= p.m) break;
      float v = acc[r][i];
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
      if (lane == 0) store_f(p.y_dtype, p.y, y_base + i * p.ld_y + o0 + r, v);
    }
  }
}

// One warp per kRows consecutive outputs o of batch entry b: w[b][o, :] against x[b][i, :] for
// every i < m (m <= kMaxM), f32 accumulation in a fixed order (each lane its 8-wide chunks in
// order of k, then a butterfly). The bf16 path issues kU chunks of each of its rows (16-byte
// streamed loads) before using any: at V2-Lite's batch 1 the W_UV projection (16 x 128 rows of
// 512) had one 512-byte load a warp in flight (2048 warps, ~8 KB an SM against the ~30 KB an SM
// that keeps HBM busy), and the W_abs one (16 x 576 rows of 192) 9,216 one-row warps, more than
// one wave of blocks. kRows and kU change how many bytes fly at once, not the order of any sum:
// every variant gives the same bits. kEarly: the bf16 path loads its first round of weight chunks
// before the PDL wait (launch_batched_gemv's contract: w is weights, which no kernel writes), so
// one HBM round trip of the chain runs under the previous kernel.
// The 4-row kernel is held to three blocks an SM with its early loads too (98 registers were two:
// W_abs's 288 blocks at V2-Lite would run in two waves).
template <int kMaxM, int kRows, int kU, bool kEarly>
__global__ void __launch_bounds__(kWarps * 32, kRows == 4 ? 3 : 1) batched_gemv_kernel(ops::BatchedMatmulParams p) {
  if constexpr (!kEarly) pdl_wait();
  const int64_t b = blockIdx.y;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kRows;
  const int lane = threadIdx.x % 32;
  if (o0 >= p.n) {
    if constexpr (kEarly) pdl_wait();  // still lets the dependents launch
    return;
  }
  const uint8_t* wbase = static_cast<const uint8_t*>(p.w);
  const int64_t x_off = b * p.stride_x;
  float acc[kRows][kMaxM];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int i = 0; i < kMaxM; ++i) acc[r][i] = 0.f;
  if (batched_gemv_vec(p)) {
    batched_rows_bf16<kRows, kU, kMaxM, kEarly>(p, b, o0, p.n, p.k, acc);
  } else {
    if constexpr (kEarly) pdl_wait();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (o0 + r >= p.n) break;
      const int64_t w_off = b * p.stride_w + (o0 + r) * p.k;
      for (int64_t j = lane; j < p.k; j += 32) {
        const float wf = load_f(p.w_dtype, wbase, w_off + j);
#pragma unroll
        for (int i = 0; i < kMaxM; ++i) {
          if (i >= p.m) break;
          acc[r][i] += wf * load_f(p.x_dtype, p.x, x_off + i * p.ld_x + j);
        }
      }
    }
  }
  batched_rows_store<kRows, kMaxM>(p, b * p.stride_y, o0, p.n, acc);
}

// -1: unset (read FRUGAL_BATCHED_GEMV on first use), 0: one row a warp and one chunk in flight
// a lane (the kernel before 2026-12-04, for A/B runs), 1: the default below.
int g_batched_gemv_mode = -1;

}  // namespace

int batched_gemv_mode() {
  if (g_batched_gemv_mode < 0) {
    const char* e = std::getenv("FRUGAL_BATCHED_GEMV");
    g_batched_gemv_mode = (e != nullptr && std::string_view(e) == "orig") ? 0 : 1;
  }
  return g_batched_gemv_mode;
}

void set_batched_gemv_mode(int mode) { g_batched_gemv_mode = mode; }

namespace {
// On though measured no faster end to end (H100, V2-Lite batch 1: 392.8 tok/s median of five runs
// with the early loads, 393.2 of five without, with the prologue + absorb launch and the MLA
// kernel's early rows on; 375.6-375.9 against 375.8-377.7 with neither;
// docs/perf/2026-12-07-session61.md): the tested default.
DefaultOnSwitch g_batched_gemv_early("FRUGAL_BATCHED_GEMV_EARLY");
}  // namespace

bool batched_gemv_early() { return g_batched_gemv_early.on(); }
void set_batched_gemv_early(bool on) { g_batched_gemv_early.set(on); }

// kRows rows a warp at m <= 4, at most 2 above (kMaxM = 16 accumulators a row: 4 rows were 128
// registers, 2 blocks an SM).
template <int kRows, int kU>
cudaError_t launch_batched_gemv_as(const ops::BatchedMatmulParams& p, cudaStream_t stream) {
  constexpr int kRowsLarge = kRows < 2 ? kRows : 2;
  const int rows = p.m <= 4 ? kRows : kRowsLarge;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.n, kWarps * rows)), static_cast<unsigned>(p.batch));
  const bool early = batched_gemv_early();
  if (p.m <= 4) {
    return early ? launch_kernel(batched_gemv_kernel<4, kRows, kU, true>, grid, kWarps * 32, 0, stream, p)
                 : launch_kernel(batched_gemv_kernel<4, kRows, kU, false>, grid, kWarps * 32, 0, stream, p);
  }
  return early ? launch_kernel(batched_gemv_kernel<kBatchedGemvMaxM, kRowsLarge, kU, true>, grid, kWarps * 32, 0, stream, p)
               : launch_kernel(batched_gemv_kernel<kBatchedGemvMaxM, kRowsLarge, kU, false>, grid, kWarps * 32, 0, stream, p);
}

cudaError_t launch_batched_gemv(const ops::BatchedMatmulParams& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return cudaSuccess;
  if (batched_gemv_mode() == 0) return launch_batched_gemv_as<1, 1>(p, stream);
  // Two chunks of a row in flight where a row has more than a warp's one (k > 256: W_UV's 512;
  // 2,048 warps of 1 KB each at V2-Lite's 16 x 128 rows), and several rows a warp once one row a
  // warp would take more than ~4K warps: W_abs's 16 x 576 rows of 192 were 9,216 one-row warps,
  // 1.5 waves at 6 blocks of 8 warps an SM; 4 rows a warp (80 registers, 3 blocks an SM) are
  // 2,304 warps in one wave with 1.5 KB each in flight.
  const bool many_rows = p.n * p.batch > 4096, two_chunks = p.k > 256;
  if (many_rows) return two_chunks ? launch_batched_gemv_as<2, 2>(p, stream) : launch_batched_gemv_as<4, 1>(p, stream);
  return two_chunks ? launch_batched_gemv_as<1, 2>(p, stream) : launch_batched_gemv_as<1, 1>(p, stream);
}

namespace {
// ---- MLA decode attention ----
constexpr int kHB = 16;       // query heads per block
constexpr int kKC = 16;       // cache rows per iteration
constexpr int kMaxD = 640;    // head_dim limit (V3 / V2-Lite: 576)
constexpr int kLdS = kMaxD + 8;
constexpr int kVecCols = kMaxD / 8 / kKC;  // 8-wide column groups per thread (16 threads per head)
constexpr int kMaxSplits = 64;

// partials: [n_tokens, n_head, splits, D] of unnormalized f32 outputs (acc, first: 16-byte
// aligned for the merge's float4 reads), then [n_tokens, n_head, splits] of (m, l) pairs (m in
// natural log units). unit = (t * n_head + h) * splits + split.
__device__ __forceinline__ float* part_acc(float* partials, int64_t unit, int D) { return partials + unit * D; }
__device__ __forceinline__ float* part_ml(float* partials, const ops::AttentionParams& p, int splits, int64_t unit) {
  return partials + int64_t{p.n_tokens} * p.n_head * splits * p.cache.head_dim + 2 * unit;
}

// The merge of one (token, head)'s splits, shared by the combine kernel and the decode kernels'
// last blocks so both give the same bits: the weights (one warp): wt[s] = exp(m_s - max m), 0 for
// an empty split (m_s = -inf) or one that underflows; returns 1 / sum_s l_s wt[s] (0 if none).
// The max and the sum run lane-strided then as one xor tree, in a fixed order.
__device__ __forceinline__ float split_weights(const float* ml, int splits, float* wt) {
  const int lane = threadIdx.x & 31;
  float m = -INFINITY;
  for (int s = lane; s < splits; s += 32) m = fmaxf(m, __ldcg(ml + 2 * s));
  m = warp_max(m);
  float l = 0.f;
  for (int s = lane; s < splits; s += 32) {
    const float ms = __ldcg(ml + 2 * s);
    const float w = ms == -INFINITY ? 0.f : __expf(ms - m);
    wt[s] = w;
    l = fmaf(__ldcg(ml + 2 * s + 1), w, l);
  }
  l = warp_sum(l);
  return l > 0.f ? 1.f / l : 0.f;
}

// out[t, h0 + r, :] = inv[r] * sum_s wt[r][s] acc[t, h0 + r, s, :] for r < nh, by the block's
// kThreads threads: each output value an fma chain over the splits in split order (splits of
// weight 0 skipped, their rows never read: an empty split writes none). A thread takes kG
// 4-wide column groups at once with kS splits of each in flight (24 16-byte loads a thread of a
// 128-thread block): one block merging 16 heads of 576 (V2-Lite's decode) is three L2 round
// trips at 4 splits, not one per column. The 256-thread CUDA-core kernel takes 8 (2 groups):
// more would raise its registers past 80 (3 blocks an SM) for all of its loop.
template <int kThreads>
__device__ __forceinline__ void merge_split_rows(const ops::AttentionParams& p, int splits, float* partials, int t,
                                                 int h0, int nh, const float* wt, const float* inv) {
  constexpr int kS = 4, kG = kThreads >= 256 ? 2 : 6;
  const int D = p.cache.head_dim, C = D / 4, n = nh * C;
  const int64_t u0 = (int64_t{t} * p.n_head + h0) * splits;
  const float4* acc4 = reinterpret_cast<const float4*>(part_acc(partials, u0, D));
  for (int i0 = threadIdx.x; i0 < n; i0 += kThreads * kG) {
    float4 a[kG];
#pragma unroll
    for (int g = 0; g < kG; ++g) a[g] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += kS) {
      float4 v[kG][kS];
      float w[kG][kS];
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int i = i0 + g * kThreads, r = i / C, c = i % C;
#pragma unroll
        for (int b = 0; b < kS; ++b) {
          const int s = s0 + b;
          w[g][b] = i < n && s < splits ? wt[r * splits + s] : 0.f;
          v[g][b] = w[g][b] != 0.f ? __ldcg(acc4 + (int64_t{r} * splits + s) * C + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
      }
#pragma unroll
      for (int g = 0; g < kG; ++g)
#pragma unroll
        for (int b = 0; b < kS; ++b) {
          if (w[g][b] == 0.f) continue;
          a[g].x = fmaf(v[g][b].x, w[g][b], a[g].x);
          a[g].y = fmaf(v[g][b].y, w[g][b], a[g].y);
          a[g].z = fmaf(v[g][b].z, w[g][b], a[g].z);
          a[g].w = fmaf(v[g][b].w, w[g][b], a[g].w);
        }
    }
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const int i = i0 + g * kThreads, r = i / C, c = i % C;
      if (i >= n) break;
      const float iv = inv[r];
      auto* out = static_cast<__nv_bfloat16*>(p.out) + int64_t{t} * p.ld_out + int64_t{h0 + r} * D + 4 * c;
      out[0] = __float2bfloat16(a[g].x * iv);
      out[1] = __float2bfloat16(a[g].y * iv);
      out[2] = __float2bfloat16(a[g].z * iv);
      out[3] = __float2bfloat16(a[g].w * iv);
    }
  }
}

// Called by every thread of a split block once its partial rows (heads h0 .. h0 + nh of token t)
// are written: with counters (the fused combine), the last block of the (token, head group) to
// finish merges all splits into out (decode_combine.cuh's tickets; it resets the counter, so
// graph replays find it zero). smem: kHB * (kMaxSplits + 1) floats the block no longer uses.
template <int kThreads>
__device__ __forceinline__ void finish_split(const ops::AttentionParams& p, int splits, float* partials,
                                            uint32_t* counters, int t, int h0, int nh, float* smem) {
  if (counters == nullptr || !take_last_split_ticket(counters + int64_t{t} * gridDim.y + blockIdx.y, splits)) return;
  float* wt = smem;                  // [nh][splits]
  float* inv = smem + kHB * kMaxSplits;  // [nh]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < nh; r += kThreads / 32) {
    const float iv = split_weights(part_ml(partials, p, splits, (int64_t{t} * p.n_head + h0 + r) * splits), splits,
                                   wt + r * splits);
    if (lane == 0) inv[r] = iv;
  }
  __syncthreads();
  merge_split_rows<kThreads>(p, splits, partials, t, h0, nh, wt, inv);
}

// The sequence token t belongs to (q_start is [n_seqs + 1] prefix sums).
__device__ __forceinline__ int seq_of_token(const int32_t* q_start, int n_seqs, int t) {
  int lo = 0, hi = n_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (q_start[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}
// Query token t's sequence and the keys [lo, hi) of its split: the token sees the cache up to
// and including its own position, cut into splits chunks of a multiple of grain keys.
struct KeyRange {
  int seq, lo, hi;
};
__device__ __forceinline__ KeyRange key_range(const ops::AttentionParams& p, int t, int splits, int split, int grain) {
  const bool own = t < p.n_seqs && p.q_start[t] == t && p.q_start[t + 1] == t + 1;  // decode: token t is sequence t
  const int seq = own ? t : seq_of_token(p.q_start, p.n_seqs, t);
  const int ctx = p.ctx_len[seq] - (p.q_start[seq + 1] - 1 - t);
  const int chunk = ((ctx + splits - 1) / splits + grain - 1) / grain * grain;
  const int lo = split * chunk;
  return {seq, lo, min(ctx, lo + chunk)};
}

__global__ void __launch_bounds__(kHB * kKC) mla_decode_kernel(ops::AttentionParams p, int splits, float* partials,
                                                               uint32_t* counters) {
  pdl_wait();
  __shared__ __align__(16) __nv_bfloat16 qs[kHB][kLdS];
  __shared__ __align__(16) __nv_bfloat16 kv[kKC][kLdS];
  __shared__ float ps[kHB][kKC];
  __shared__ float alpha_s[kHB];
  const auto& c = p.cache;
  const int D = c.head_dim, DV = D / 8;
  const int t = blockIdx.x, h0 = blockIdx.y * kHB, split = blockIdx.z;
  const int tid = threadIdx.x;
  const KeyRange kr = key_range(p, t, splits, split, 1);
  const int seq = kr.seq, lo = kr.lo, hi = kr.hi;
  const int nh = min(kHB, p.n_head - h0);
  // q rows of this block's heads.
  for (int i = tid; i < kHB * DV; i += blockDim.x) {
    const int h = i / DV, cc = (i % DV) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (h < nh) v = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.q) + int64_t{t} * p.ld_q + (h0 + h) * D + cc);
    *reinterpret_cast<uint4*>(&qs[h][cc]) = v;
  }
  const int sh = tid / kKC, sj = tid % kKC;   // score role: head sh, row sj
  const int ah = tid / kKC, ac = tid % kKC;   // accumulate role: head ah, column groups ac + kKC * i
  float acc[kVecCols][8];
#pragma unroll
  for (int i = 0; i < kVecCols; ++i)
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[i][q] = 0.f;
  float m_run = -INFINITY, l_run = 0.f;  // of head sh (== ah), kept by all 16 threads of the head
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  const auto* cache = static_cast<const __nv_bfloat16*>(c.k_cache);
  for (int k0 = lo; k0 < hi; k0 += kKC) {
    __syncthreads();  // kv and ps of the last iteration are consumed
    for (int i = tid; i < kKC * DV; i += blockDim.x) {
      const int j = i / DV, cc = (i % DV) * 8, pos = k0 + j;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (pos < hi) {
        const int64_t slot = int64_t{table[pos / c.block_size]} * c.block_size + pos % c.block_size;
        v = *reinterpret_cast<const uint4*>(cache + slot * D + cc);
      }
      *reinterpret_cast<uint4*>(&kv[j][cc]) = v;
    }
    __syncthreads();
    float s = -INFINITY;
    if (k0 + sj < hi && sh < nh) {
      float d = 0.f;
      for (int cc = 0; cc < D; cc += 8) {
        const uint4 a = *reinterpret_cast<const uint4*>(&qs[sh][cc]);
        const uint4 b = *reinterpret_cast<const uint4*>(&kv[sj][cc]);
        const auto* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
        const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float2 x = __bfloat1622float2(a2[q]), y = __bfloat1622float2(b2[q]);
          d += x.x * y.x + x.y * y.y;
        }
      }
      s = d * p.scale;
    }
    float cmax = s;
#pragma unroll
    for (int o = kKC / 2; o > 0; o >>= 1) cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, o, kKC));
    const float m_new = fmaxf(m_run, cmax);
    const float e = s == -INFINITY ? 0.f : __expf(s - m_new);
    float sum = e;
#pragma unroll
    for (int o = kKC / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o, kKC);
    const float alpha = m_run == -INFINITY ? 0.f : __expf(m_run - m_new);
    l_run = l_run * alpha + sum;
    m_run = m_new;
    ps[sh][sj] = e;
    if (sj == 0) alpha_s[sh] = alpha;
    __syncthreads();
    const float al = alpha_s[ah];
#pragma unroll
    for (int i = 0; i < kVecCols; ++i) {
      const int cg = ac + kKC * i;
      if (cg >= DV) break;
      float a[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) a[q] = acc[i][q] * al;
      for (int j = 0; j < kKC; ++j) {
        const float pj = ps[ah][j];
        const uint4 b = *reinterpret_cast<const uint4*>(&kv[j][cg * 8]);
        const auto* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float2 y = __bfloat1622float2(b2[q]);
          a[2 * q] += pj * y.x;
          a[2 * q + 1] += pj * y.y;
        }
      }
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[i][q] = a[q];
    }
  }
  const int h = h0 + ah;
  if (splits == 1) {
    if (ah >= nh) return;
    const float inv = l_run > 0.f ? 1.f / l_run : 0.f;
    auto* out = static_cast<__nv_bfloat16*>(p.out) + int64_t{t} * p.ld_out + int64_t{h} * D;
#pragma unroll
    for (int i = 0; i < kVecCols; ++i) {
      const int cg = ac + kKC * i;
      if (cg >= DV) break;
#pragma unroll
      for (int q = 0; q < 8; ++q) out[cg * 8 + q] = __float2bfloat16(acc[i][q] * inv);
    }
    return;
  }
  if (ah < nh) {
    const int64_t unit = (int64_t{t} * p.n_head + h) * splits + split;
    float* ml = part_ml(partials, p, splits, unit);
    float* pa = part_acc(partials, unit, D);
    if (ac == 0) { ml[0] = m_run; ml[1] = l_run; }
#pragma unroll
    for (int i = 0; i < kVecCols; ++i) {
      const int cg = ac + kKC * i;
      if (cg >= DV) break;
#pragma unroll
      for (int q = 0; q < 8; ++q) pa[cg * 8 + q] = acc[i][q];
    }
  }
  // The merge's weights reuse the key rows (kKC x kLdS bf16 = 20 KB; after the ticket's barrier
  // no thread reads them).
  static_assert(sizeof(kv) >= sizeof(float) * kHB * (kMaxSplits + 1), "merge weights fit in kv");
  finish_split<kHB * kKC>(p, splits, partials, counters, t, h0, nh, reinterpret_cast<float*>(&kv[0][0]));
}

// The separate combine (no counters, or FRUGAL_MLA_FUSED_COMBINE=0): grid (n_tokens, n_head),
// one head a block, the same merge as the decode kernels' last blocks (split_weights,
// merge_split_rows), so either way gives the same bits.
constexpr int kCombineThreads = 128;
__global__ void __launch_bounds__(kCombineThreads) mla_combine_kernel(ops::AttentionParams p, int splits, float* partials) {
  pdl_wait();
  __shared__ float wt[kMaxSplits];
  __shared__ float inv_s;
  const int t = blockIdx.x, h = blockIdx.y;
  if (threadIdx.x < 32) {
    const float iv = split_weights(part_ml(partials, p, splits, (int64_t{t} * p.n_head + h) * splits), splits, wt);
    if (threadIdx.x == 0) inv_s = iv;
  }
  __syncthreads();
  merge_split_rows<kCombineThreads>(p, splits, partials, t, h, 1, wt, &inv_s);
}

// The combine and the per-head matmul after it in one launch (attention_batched_matmul: MLA's
// W_UV): grid (row chunks of mm.n, heads, tokens). Each block merges its (token, head)'s splits
// over the mm.k dims the matmul reads into shared memory, rounded to bf16 as the combine kernel
// stores them (split_weights, then each dim's f32 sum in split order: merge_split_rows's bits),
// then each warp takes kUvRows rows of the head's matrix with the batched GEMV's arithmetic (each
// lane its 8-wide chunks in order of k, rows_dot_bf16, then the xor tree): the sequence's bits, with
// one launch and no round trip of the merged rows through global memory. The merge is repeated by
// the head's mm.n / (kUvWarps kUvRows) blocks (8 at V2-Lite: 4 splits x 2 KB of f32 each).
// kEarly (batched_gemv_early): each warp loads its rows' first round before the PDL wait (W_UV
// is weights, which no kernel writes), so their HBM round trip runs under the decode kernel.
constexpr int kUvWarps = 8, kUvRows = 2, kUvU = 2;
// late (FRUGAL_MLA_UV_LATE_TRIGGER=1, an A/B knob, off by default): the next kernel (the o GEMV,
// whose warps request their whole rows before their own wait) is let launch only once this
// block has read its split partials, not at this kernel's wait, so those early loads do not
// meet the partials' reads (the fused routers' reading, docs/perf/2026-12-07-session64.md). Where
// the trigger sits changes only timing. Measured +0.2% (noise; V2-Lite batch 1, H100 2026-12-08).
template <bool kEarly>
__global__ void __launch_bounds__(kUvWarps * 32) mla_combine_uv_kernel(ops::AttentionParams p, int splits, float* partials,
                                                                        ops::BatchedMatmulParams mm, int late) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.z, h = blockIdx.y;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kUvWarps + warp) * kUvRows;
  const __nv_bfloat16* w[kUvRows];
#pragma unroll
  for (int r = 0; r < kUvRows; ++r)  // rows past n read row n - 1 (never stored)
    w[r] = static_cast<const __nv_bfloat16*>(mm.w) + h * mm.stride_w + min(o0 + r, mm.n - 1) * mm.k;
  uint4 wv[kUvU][kUvRows];
  if constexpr (kEarly) {
    if (o0 < mm.n) rows_load_round<kUvRows, kUvU>(w, mm.k, lane * 8, wv);
  }
  pdl_wait_only();
  if (!late) pdl_trigger();
  __shared__ float wt[kMaxSplits];
  __shared__ float inv_s;
  __shared__ __align__(16) __nv_bfloat16 xrow[kMaxD];
  const int64_t u0 = (int64_t{t} * p.n_head + h) * splits;
  if (threadIdx.x < 32) {
    const float iv = split_weights(part_ml(partials, p, splits, u0), splits, wt);
    if (threadIdx.x == 0) inv_s = iv;
  }
  __syncthreads();
  const int C = p.cache.head_dim / 4;
  const float4* acc4 = reinterpret_cast<const float4*>(part_acc(partials, u0, p.cache.head_dim));
  for (int c = threadIdx.x; c < static_cast<int>(mm.k / 4); c += kUvWarps * 32) {
    float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < splits; ++s) {
      const float w = wt[s];
      if (w == 0.f) continue;
      const float4 v = __ldcg(acc4 + int64_t{s} * C + c);
      a.x = fmaf(v.x, w, a.x);
      a.y = fmaf(v.y, w, a.y);
      a.z = fmaf(v.z, w, a.z);
      a.w = fmaf(v.w, w, a.w);
    }
    const float iv = inv_s;
    xrow[4 * c] = __float2bfloat16(a.x * iv);
    xrow[4 * c + 1] = __float2bfloat16(a.y * iv);
    xrow[4 * c + 2] = __float2bfloat16(a.z * iv);
    xrow[4 * c + 3] = __float2bfloat16(a.w * iv);
  }
  __syncthreads();
  if (late) pdl_trigger();
  if (o0 >= mm.n) return;  // no barrier follows
  if constexpr (!kEarly) rows_load_round<kUvRows, kUvU>(w, mm.k, lane * 8, wv);
  float acc[kUvRows][1] = {};
  rows_dot_bf16_from<kUvRows, kUvU>(w, mm.k, 1, [&](int, int64_t j) { return *reinterpret_cast<const uint4*>(xrow + j); }, wv,
                                    acc);
  batched_rows_store<kUvRows, 1>(mm, h * mm.stride_y + int64_t{t} * mm.ld_y, o0, mm.n, acc);  // token t's row only
}

// ---- MLA's prologue and the absorbed q projection in one launch (absorb_rope_identity) ----
// Blocks [0, n_tokens): mla_kv_prologue_kernel's body for token blockIdx.x (mla_prologue.cuh),
// each q head's rotated q_pe also stored as the last rotary_dim values of its [q_abs | q_pe] row
// (what the identity rows of W_abs would compute: 1 x a bf16 value, the same value). Then blocks
// of the batched GEMV's W_abs variant (4 rows a warp, one chunk a lane in flight, m <= 4) over
// the first `latent` rows and the first `nope` columns of each W_abs[h] (rows mm.k apart): those
// read q's nope part, which the prologue does not touch, and each lane's chunks are the
// sequence's less the zero columns (whose products, +-0, change no nonzero sum). So no block
// waits for another, and the chain has one launch where it had two. kEarly: the GEMV blocks load
// their weight rows before the PDL wait (batched_gemv_early). Two blocks an SM (three spilled):
// V2-Lite's 16 x 16 GEMV blocks and a prologue block a token still fit one wave of 132 SMs.
constexpr int kPaRows = 4, kPaMaxM = 4;
template <bool kEarly>
__global__ void __launch_bounds__(kWarps * 32, 2) mla_prologue_absorb_kernel(ops::MlaKvPrologueParams pro,
                                                                              ops::BatchedMatmulParams mm, int latent, int nope) {
  const int64_t n_tok = pro.norm.rows;
  if (blockIdx.x < n_tok) {
    extern __shared__ float sc[];  // [half] cos, [half] sin
    __shared__ float red[32];
    mla_prologue_block(pro, blockIdx.x, sc, red, MlaQCopy{static_cast<__nv_bfloat16*>(mm.y) + latent, mm.ld_y, mm.stride_y});
    return;
  }
  const int64_t gb = blockIdx.x - n_tok, per = ceil_div(int64_t{latent}, int64_t{kWarps} * kPaRows);
  const int64_t b = gb / per, o0 = ((gb - b * per) * kWarps + static_cast<int>(threadIdx.x >> 5)) * kPaRows;
  if (o0 >= latent) {
    pdl_wait();  // still lets the dependents launch
    return;
  }
  if constexpr (!kEarly) pdl_wait();
  float acc[kPaRows][kPaMaxM] = {};
  batched_rows_bf16<kPaRows, 1, kPaMaxM, kEarly>(mm, b, o0, latent, nope, acc);
  batched_rows_store<kPaRows, kPaMaxM>(mm, b * mm.stride_y, o0, latent, acc);
}

// ---- MLA decode attention on the tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulators) ----
// One block per (query token, group of 16 heads, split) as the CUDA-core kernel above, the 16
// heads being the M = 16 rows of every mma (all of them share the single latent KV head). The
// split's keys go by in tiles of kMmaKeys rows gathered through the block table into padded
// shared memory (cp.async, kMmaStages stages: the next tile's copies fly while one computes;
// rows past the split are zero-filled and masked). The 4 warps split the 576 dims: warp w holds
// the A fragments of Q's dims [144w, 144w + 144) in registers (loaded once) and the f32
// accumulators of O's columns [144w, 144w + 144). Per tile:
//   S = Q K^T: each warp multiplies its 9 k steps for all 32 keys (ldmatrix of the K rows) and
//     leaves its partial S in shared memory in fragment order; after a barrier every warp sums
//     the 4 partials in the same order, so all warps hold the same S (16 x 32, C layout);
//   online softmax in registers (log2 units), identical in every warp;
//   O += P V: P's accumulator fragments are the A operand (as attention_decode_mma.cu), V the
//     same rows (their first 576 values, ldmatrix.trans), each warp its own 18 column tiles.
// Two barriers a tile. The partials and the merge are the CUDA-core kernel's (m in natural
// log units), so either kernel's splits merge the same way.
constexpr int kMmaD = 576;                               // kv_lora_rank 512 + rope 64 (V2, V2-Lite, V3)
constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaKeys = 32;                             // keys per tile
constexpr int kMmaRowBytes = kMmaD * 2 + 16;             // 73 16-byte pieces: ldmatrix rows hit distinct bank quads
constexpr int kMmaPieces = kMmaD * 2 / 16;               // 16-byte pieces of a cache row
constexpr int kMmaStageBytes = kMmaKeys * kMmaRowBytes;  // 37,376
constexpr int kMmaStages = 2;
constexpr int kMmaKSteps = kMmaD / 16 / kMmaWarps;       // 9 k steps of Q K^T a warp
constexpr int kMmaOTiles = kMmaD / 8 / kMmaWarps;        // 18 n tiles of O a warp
constexpr int kMmaSTiles = kMmaKeys / 8;                 // 4 n tiles of S
constexpr int kMmaSmem = kMmaStages * kMmaStageBytes + kMmaWarps * kMmaSTiles * 32 * 16;  // + S partials
static_assert(kMmaD % (16 * kMmaWarps) == 0 && kMmaKeys == 8 * kMmaWarps && 8 * kMmaPieces % 32 == 0,
              "each warp: 16-dim k steps of its own, 8 keys of a tile to gather in whole 32-lane copies");

// kEarly: the split's first kMmaStages tiles are copied before the PDL wait, all but the rows
// this step writes. Those rows (positions from the sequence's first new token, ctx_len less its
// tokens in this step: the latent prologue, an earlier launch of this step, writes them) and the
// query come after the wait. The step's inputs (q_start, ctx_len, block tables) are uploaded before the
// step's first kernel, and an older row was written by an earlier step, so neither depends on a
// kernel still running. At batch 1 the rule gives two tiles a split, so the whole split's DRAM
// round trip leaves the chain; a longer split goes on through the ring after the wait.
template <bool kEarly>
__global__ void __launch_bounds__(kMmaThreads, 2) mla_decode_mma_kernel(ops::AttentionParams p, int splits, float* partials,
                                                                         uint32_t* counters) {
  if constexpr (!kEarly) pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  float4* sred = reinterpret_cast<float4*>(smem + kMmaStages * kMmaStageBytes);  // [warp][S tile][lane]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  const int mat = lane >> 3, mr = lane & 7;  // ldmatrix: the 8x8 matrix and row this lane addresses
  const int t = blockIdx.x, h0 = blockIdx.y * kHB, split = blockIdx.z;
  const KeyRange kr = key_range(p, t, splits, split, kMmaKeys);
  const int lo = kr.lo, hi = kr.hi, nh = min(kHB, p.n_head - h0);
  const int64_t unit0 = (int64_t{t} * p.n_head + h0) * splits + split;  // partials of head h0 + row: + row * splits
  if (lo >= hi) {  // an empty split (block-uniform): weight 0 in the merge, its o rows are never read
    if constexpr (kEarly) pdl_wait();
    if (threadIdx.x < nh) {
      float* ml = part_ml(partials, p, splits, unit0 + int64_t{threadIdx.x} * splits);
      ml[0] = -INFINITY;
      ml[1] = 0.f;
    }
    finish_split<kMmaThreads>(p, splits, partials, counters, t, h0, nh, reinterpret_cast<float*>(smem));
    return;
  }
  const int bs = p.cache.block_size;
  const int32_t* table = p.block_tables + int64_t{kr.seq} * p.max_blocks_per_seq;
  const char* cache = static_cast<const char*>(p.cache.k_cache);
  // The first position this step writes for the sequence (kEarly's split of the rows).
  const int old_end = kEarly ? p.ctx_len[kr.seq] - (p.q_start[kr.seq + 1] - p.q_start[kr.seq]) : 0;

  // A fragments of this warp's dims (rows past the heads are zeros).
  uint32_t qf[kMmaKSteps][4];
  auto load_q = [&] {
    const auto* q = static_cast<const __nv_bfloat16*>(p.q) + int64_t{t} * p.ld_q + int64_t{h0} * kMmaD;
#pragma unroll
    for (int ks = 0; ks < kMmaKSteps; ++ks) {
      const int d = (warp * kMmaKSteps + ks) * 16 + 2 * tq;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = g + 8 * r;
        const bool ok = row < nh;
        qf[ks][r] = ok ? *reinterpret_cast<const uint32_t*>(q + row * kMmaD + d) : 0u;
        qf[ks][2 + r] = ok ? *reinterpret_cast<const uint32_t*>(q + row * kMmaD + d + 8) : 0u;
      }
    }
  };

  // Warp w gathers keys [8w, 8w + 8) of a tile; lane l looks up key l % 8's slot (-1: past the split).
  auto slot_at = [&](int tile) {
    const int pos = lo + tile * kMmaKeys + warp * 8 + mr;
    return pos < hi ? table[pos / bs] * bs + pos % bs : -1;
  };
  // The warp's rows of `tile` into stage st (no commit): part 0 every row, 1 the rows before
  // old_end, 2 the rows from it. Each row (or its zero fill, past the split) is copied by one part.
  auto copy_rows = [&](int st, int tile, int my_slot, int part) {
    unsigned char* dst = smem + st * kMmaStageBytes + warp * 8 * kMmaRowBytes;
#pragma unroll
    for (int c = 0; c < 8 * kMmaPieces / 32; ++c) {  // whole rows per copy instruction, coalesced
      const int idx = c * 32 + lane, key = idx / kMmaPieces, piece = idx % kMmaPieces;
      const int slot = __shfl_sync(0xffffffffu, my_slot, key);
      if (part != 0 && (lo + tile * kMmaKeys + warp * 8 + key < old_end) != (part == 1)) continue;
      const bool ok = slot >= 0;
      cp_async16(dst + key * kMmaRowBytes + piece * 16, cache + (ok ? int64_t{slot} * (kMmaD * 2) : 0) + piece * 16, ok);
    }
  };
  auto issue = [&](int st, int my_slot) {
    copy_rows(st, 0, my_slot, 0);
    cp_async_commit();
  };

  float o[kMmaOTiles][4];
#pragma unroll
  for (int v = 0; v < kMmaOTiles; ++v) o[v][0] = o[v][1] = o[v][2] = o[v][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // rows g, g + 8 (l: this lane's columns)
  const float score_scale = p.scale * 1.4426950408889634f;           // log2 units
  const int n_it = (hi - lo + kMmaKeys - 1) / kMmaKeys;
  int slot_next = 0;
  if constexpr (kEarly) {
    // Tiles 0 .. kMmaStages - 1: the older rows now, the step's own after the wait; then every
    // copy so far lands before the loop, which refills one stage a tile after that.
    int sl[kMmaStages];
#pragma unroll
    for (int st = 0; st < kMmaStages; ++st) {
      sl[st] = st < n_it ? slot_at(st) : -1;
      if (st < n_it) copy_rows(st, st, sl[st], 1);
    }
    cp_async_commit();
    pdl_wait();
#pragma unroll
    for (int st = 0; st < kMmaStages; ++st)
      if (st < n_it && lo + (st + 1) * kMmaKeys > old_end) copy_rows(st, st, sl[st], 2);
    cp_async_commit();
    load_q();
    if (kMmaStages < n_it) slot_next = slot_at(kMmaStages);
    cp_async_wait<0>();
  } else {
    load_q();
    slot_next = cp_ring_start<kMmaStages>(n_it, issue, slot_at);
  }
  for (int it = 0; it < n_it; ++it) {
    if constexpr (kEarly) {
      // Tile it >= kMmaStages was issued at the top of iteration it - kMmaStages + 1, with one
      // group committed at the top of every iteration since.
      if (it >= kMmaStages) cp_async_wait<kMmaStages - 2>();
      __syncthreads();  // everyone's copies have landed; tile it - 1's stage and S partials are consumed
      if (it >= 1) {
        const int next = it - 1 + kMmaStages;
        if (next < n_it) {
          issue((it - 1) % kMmaStages, slot_next);
          if (next + 1 < n_it) slot_next = slot_at(next + 1);
        } else {
          cp_async_commit();  // an empty group keeps the count uniform
        }
      }
    } else {
      cp_async_wait<kMmaStages - 2>();  // this thread's copies of tile it have landed
      __syncthreads();  // everyone's have; tile it - 1's stage and S partials are consumed
      cp_ring_advance<kMmaStages>(it, n_it, slot_next, issue, slot_at);
    }
    const unsigned char* stage = smem + (it % kMmaStages) * kMmaStageBytes;

    // This warp's part of S = Q K^T; ldmatrix x4: keys (16 np + 8 (mat / 2) + mr), dims + 8 (mat % 2).
    float s[kMmaSTiles][4];
#pragma unroll
    for (int nt = 0; nt < kMmaSTiles; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kMmaKSteps; ++ks) {
      const int d0 = (warp * kMmaKSteps + ks) * 16 + 8 * (mat & 1);
#pragma unroll
      for (int np = 0; np < kMmaSTiles / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, stage + (16 * np + 8 * (mat >> 1) + mr) * kMmaRowBytes + d0 * 2);
        mma_bf16(s[2 * np], qf[ks], b[0], b[1]);
        mma_bf16(s[2 * np + 1], qf[ks], b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < kMmaSTiles; ++nt)
      sred[(warp * kMmaSTiles + nt) * 32 + lane] = make_float4(s[nt][0], s[nt][1], s[nt][2], s[nt][3]);
    __syncthreads();
    // The whole S (the 4 warps' partials, summed in warp order: the same in every warp), scaled,
    // keys past the split masked, then the online softmax per row.
    const int key0 = lo + it * kMmaKeys;
    float mt[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kMmaSTiles; ++nt) {
      float4 a = sred[nt * 32 + lane];
#pragma unroll
      for (int w = 1; w < kMmaWarps; ++w) {
        const float4 b = sred[(w * kMmaSTiles + nt) * 32 + lane];
        a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
      }
      const float v[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = key0 + nt * 8 + 2 * tq + (e & 1) < hi ? v[e] * score_scale : -INFINITY;
        s[nt][e] = x;
        mt[e >> 1] = fmaxf(mt[e >> 1], x);
      }
    }
    float alpha[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 1));
      mt[r] = fmaxf(mt[r], __shfl_xor_sync(0xffffffffu, mt[r], 2));
      const float m_new = fmaxf(m_run[r], mt[r]);  // finite: every tile has at least one key
      base[r] = m_new;
      alpha[r] = fast_exp2(m_run[r] - m_new);      // 2^-inf = 0 on the first tile
      m_run[r] = m_new;
      l_run[r] *= alpha[r];
    }
#pragma unroll
    for (int nt = 0; nt < kMmaSTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pr = fast_exp2(s[nt][e] - base[e >> 1]);
        l_run[e >> 1] += pr;
        s[nt][e] = pr;
      }
#pragma unroll
    for (int v = 0; v < kMmaOTiles; ++v) {
      o[v][0] *= alpha[0];
      o[v][1] *= alpha[0];
      o[v][2] *= alpha[1];
      o[v][3] *= alpha[1];
    }
    // O += P V over the warp's columns; ldmatrix x4.trans: keys (16 kk + 8 (mat % 2) + mr),
    // dims n0 + 8 (mat / 2): the B pairs of two column tiles.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const unsigned char* vrow =
          stage + (16 * kk + 8 * (mat & 1) + mr) * kMmaRowBytes + (warp * kMmaOTiles * 8 + 8 * (mat >> 1)) * 2;
#pragma unroll
      for (int vp = 0; vp < kMmaOTiles / 2; ++vp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vrow + vp * 32);
        mma_bf16(o[2 * vp], pa, b[0], b[1]);
        mma_bf16(o[2 * vp + 1], pa, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();  // no copy is left in flight at exit (the trailing groups are empty)

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  // Rows g and g + 8 (heads h0 + row), columns warp * 144 + 8 v + 2 tq (+ 1).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (row >= nh) continue;
    const int64_t unit = unit0 + int64_t{row} * splits;
    if (splits == 1) {
      const float inv = l_run[r] > 0.f ? 1.f / l_run[r] : 0.f;
      auto* out = static_cast<__nv_bfloat16*>(p.out) + int64_t{t} * p.ld_out + int64_t{h0 + row} * kMmaD +
                  warp * kMmaOTiles * 8 + 2 * tq;
#pragma unroll
      for (int v = 0; v < kMmaOTiles; ++v)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * v) = __floats2bfloat162_rn(o[v][2 * r] * inv, o[v][2 * r + 1] * inv);
    } else {
      if (warp == 0 && tq == 0) {
        float* ml = part_ml(partials, p, splits, unit);
        ml[0] = m_run[r] * 0.6931471805599453f;  // natural log units, as the CUDA-core kernel
        ml[1] = l_run[r];
      }
      float* pa = part_acc(partials, unit, kMmaD) + warp * kMmaOTiles * 8 + 2 * tq;
#pragma unroll
      for (int v = 0; v < kMmaOTiles; ++v) *reinterpret_cast<float2*>(pa + 8 * v) = make_float2(o[v][2 * r], o[v][2 * r + 1]);
    }
  }
  // The merge's weights reuse the stages (the ticket's barrier comes after every warp's last
  // ldmatrix; no copy is in flight).
  if (splits > 1) finish_split<kMmaThreads>(p, splits, partials, counters, t, h0, nh, reinterpret_cast<float*>(smem));
}

DefaultOnSwitch g_mla_mma("FRUGAL_MLA_MMA");
// -1: unset (read FRUGAL_MLA_FUSED_COMBINE on first use), else MlaMerge.
int g_mla_fused_mode = -1;

DefaultOnSwitch g_mla_early("FRUGAL_MLA_EARLY");

int mla_mma_blocks_per_sm() {
  return std::min(cached_blocks_per_sm<mla_decode_mma_kernel<false>>(kMmaThreads, kMmaSmem, 1),
                  cached_blocks_per_sm<mla_decode_mma_kernel<true>>(kMmaThreads, kMmaSmem, 1));
}

}  // namespace

bool mla_decode_supported(const ops::AttentionParams& p) {
  const auto& c = p.cache;
  return p.act_dtype == DType::kBF16 && c.cache_dtype == DType::kBF16 && c.n_head_kv == 1 && c.k_cache == c.v_cache &&
         c.head_dim % 8 == 0 && c.head_dim > 128 && c.head_dim <= kMaxD && p.sliding_window == 0 && p.ld_q % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && reinterpret_cast<uintptr_t>(c.k_cache) % 16 == 0 &&
         p.max_ctx_len > 0 && c.block_size > 0;
}

bool mla_mma_enabled() { return g_mla_mma.on(); }
void set_mla_mma_enabled(bool on) { g_mla_mma.set(on); }

bool mla_decode_early() { return g_mla_early.on(); }
void set_mla_decode_early(bool on) { g_mla_early.set(on); }

MlaMerge mla_merge_mode() {
  if (g_mla_fused_mode < 0) {
    const char* e = std::getenv("FRUGAL_MLA_FUSED_COMBINE");
    const std::string_view v = e != nullptr ? e : "";
    // The combine kernel unless asked for: the last-block merge measured slower end to end (H200,
    // V2-Lite batch 1: 379.8 tok/s with it (auto) against 405.5 with the combine kernel,
    // docs/perf/2026-12-04-session36.md). FRUGAL_MLA_FUSED_COMBINE=auto: the merge up to
    // kMlaFusedMergeMaxBytes; =always (or 1): at every size.
    g_mla_fused_mode = static_cast<int>(v == "auto"                ? MlaMerge::kAuto
                                        : v == "always" || v == "1" ? MlaMerge::kFused
                                                                    : MlaMerge::kCombineKernel);
  }
  return static_cast<MlaMerge>(g_mla_fused_mode);
}

void set_mla_merge_mode(MlaMerge m) { g_mla_fused_mode = static_cast<int>(m); }

bool mla_decode_fuses_combine(const ops::AttentionParams& p, int splits, const uint32_t* counters) {
  // One block reads a group's every partial row: past kMlaFusedMergeMaxBytes (7 splits of 16
  // heads at 576) the combine kernel, one block a head, spreads that over more SMs (the GQA
  // decode's fused merge measured slower than its combine kernel for that reason).
  const int64_t merge_bytes = int64_t{splits} * (p.n_head < kHB ? p.n_head : kHB) * p.cache.head_dim * 4;
  const MlaMerge mode = mla_merge_mode();
  const bool want = mode == MlaMerge::kFused || (mode == MlaMerge::kAuto && merge_bytes <= kMlaFusedMergeMaxBytes);
  return want && counters != nullptr && splits > 1 && splits <= kMaxSplits &&
         int64_t{p.n_tokens} * ((p.n_head + kHB - 1) / kHB) <= kDecodeCounters;
}

bool mla_decode_mma_applies(const ops::AttentionParams& p) {
  // Output rows are written as bf16 pairs.
  return mla_mma_enabled() && mla_decode_supported(p) && p.cache.head_dim == kMmaD && p.ld_out % 2 == 0 &&
         reinterpret_cast<uintptr_t>(p.out) % 4 == 0;
}

cudaError_t prepare_mla_decode() {
  (void)mla_mma_blocks_per_sm();  // the shared-memory limits and occupancy, before any graph capture
  return cudaGetLastError();
}

int mla_decode_splits(const ops::AttentionParams& p, int n_sms) {
  // FRUGAL_MLA_SPLITS=n forces n splits (1..64) on either kernel, for tuning runs; read once.
  static const int forced = [] {
    const char* e = std::getenv("FRUGAL_MLA_SPLITS");
    const int n = e != nullptr ? std::atoi(e) : 0;
    return n < 0 ? 0 : n > kMaxSplits ? kMaxSplits : n;
  }();
  if (forced > 0) return forced;
  if (mla_decode_mma_applies(p)) {
    // As many blocks as fit one wave (never more: a second, partial wave of whole splits costs
    // more than the combine saves), at least two key tiles a split.
    const int64_t units = int64_t{p.n_tokens} * ((p.n_head + kHB - 1) / kHB);
    int64_t want = int64_t{n_sms} * mla_mma_blocks_per_sm() / units;
    const int64_t hi = (p.max_ctx_len + 2 * kMmaKeys - 1) / (2 * kMmaKeys);
    if (want > hi) want = hi;
    if (want > kMaxSplits) want = kMaxSplits;
    return want < 1 ? 1 : static_cast<int>(want);
  }
  const int64_t units = int64_t{p.n_tokens} * ((p.n_head + kHB - 1) / kHB);
  int64_t want = (2 * int64_t{n_sms} + units - 1) / units;
  const int64_t hi = (p.max_ctx_len + kKC - 1) / kKC;  // at least one iteration a split
  if (want > hi) want = hi;
  if (want > kMaxSplits) want = kMaxSplits;
  return want < 1 ? 1 : static_cast<int>(want);
}

size_t mla_decode_scratch_bytes(const ops::AttentionParams& p, int splits) {
  // The fused combine's counters are not here: the scratch is shared by other ops and never
  // zeroed; they are the caller's zeroed kDecodeCounters words (launch_mla_decode).
  if (splits <= 1) return 0;
  return sizeof(float) * static_cast<size_t>(p.n_tokens) * p.n_head * splits * (2 + p.cache.head_dim);
}

namespace {

// The decode kernel alone (its last blocks merge where `fused` is set).
cudaError_t launch_mla_decode_kernel(const ops::AttentionParams& p, int splits, float* part, uint32_t* fused,
                                     cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>((p.n_head + kHB - 1) / kHB), static_cast<unsigned>(splits));
  if (mla_decode_mma_applies(p)) {
    if (mla_decode_early()) {
      if (const cudaError_t err = raise_dynamic_smem_once<mla_decode_mma_kernel<true>>(kMmaSmem); err != cudaSuccess) return err;
      return launch_kernel(mla_decode_mma_kernel<true>, grid, kMmaThreads, kMmaSmem, stream, p, splits, part, fused);
    }
    if (const cudaError_t err = raise_dynamic_smem_once<mla_decode_mma_kernel<false>>(kMmaSmem); err != cudaSuccess) return err;
    return launch_kernel(mla_decode_mma_kernel<false>, grid, kMmaThreads, kMmaSmem, stream, p, splits, part, fused);
  }
  return launch_kernel(mla_decode_kernel, grid, kHB * kKC, 0, stream, p, splits, part, fused);
}

}  // namespace

bool mla_combine_uv_fusable(const ops::AttentionParams& p, const ops::BatchedMatmulParams& mm, int splits) {
  // The matmul reads the attention's output rows as written (x = out, one head a batch entry, the
  // latent part only), at decode sizes (the batched GEMV's m), with the GEMV's 16-byte path.
  return splits > 1 && splits <= kMaxSplits && mla_decode_supported(p) && p.n_tokens > 0 && mm.x == p.out &&
         mm.ld_x == p.ld_out && mm.stride_x == p.cache.head_dim && mm.batch == p.n_head && mm.m == p.n_tokens &&
         mm.m <= kBatchedGemvMaxM && mm.n > 0 && mm.k > 0 && mm.k <= p.cache.head_dim && mm.k % 8 == 0 &&
         batched_gemv_vec(mm) && (mm.y_dtype == DType::kBF16 || mm.y_dtype == DType::kF32 || mm.y_dtype == DType::kF16);
}

bool mla_prologue_absorb_fusable(const ops::MlaAttentionParams& f) {
  const ops::BatchedMatmulParams& mm = f.absorb;
  const ops::RopeParams& r = f.prologue.rope;
  if (!f.absorb_rope_identity || !mla_kv_prologue_fusable(f.prologue) || !batched_gemv_vec(mm)) return false;
  const int64_t R = r.rotary_dim, nope = mm.k - R, latent = mm.n - R;
  const auto addr = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  // The rows of x (q heads, then the rest of each token's row) and of y must not meet.
  const uintptr_t x0 = addr(mm.x), x1 = x0 + 2 * static_cast<uintptr_t>((mm.m - 1) * mm.ld_x + mm.batch * mm.stride_x);
  const uintptr_t y0 = addr(mm.y), y1 = y0 + 2 * static_cast<uintptr_t>((mm.m - 1) * mm.ld_y + mm.batch * mm.stride_y);
  return mm.m >= 1 && mm.m <= kPaMaxM && mm.m == r.n_tokens && mm.m == f.prologue.norm.rows && mm.batch == r.n_head &&
         mm.batch > 0 && mm.y_dtype == DType::kBF16 && nope > 0 && nope % 8 == 0 && latent > 0 && latent % 2 == 0 &&
         mm.k == r.head_dim && mm.stride_x == r.head_dim && r.ld_q == mm.ld_x &&
         addr(r.q) == x0 + 2 * static_cast<uintptr_t>(nope) && mm.stride_y >= mm.n && mm.ld_y >= mm.batch * mm.stride_y &&
         mm.ld_y % 2 == 0 && mm.stride_y % 2 == 0 && addr(mm.y) % 4 == 0 && mm.ld_x >= mm.batch * mm.stride_x &&
         (y1 <= x0 || x1 <= y0) && latent <= 0x7fffffff;
}

cudaError_t launch_mla_prologue_absorb(const ops::MlaAttentionParams& f, cudaStream_t stream) {
  const ops::BatchedMatmulParams& mm = f.absorb;
  const int R = f.prologue.rope.rotary_dim, latent = static_cast<int>(mm.n - R), nope = static_cast<int>(mm.k - R);
  const int64_t blocks = f.prologue.norm.rows + mm.batch * ceil_div(int64_t{latent}, int64_t{kWarps} * kPaRows);
  const size_t smem = static_cast<size_t>(R) * sizeof(float);
  return batched_gemv_early()
             ? launch_kernel(mla_prologue_absorb_kernel<true>, static_cast<unsigned>(blocks), kWarps * 32, smem, stream, f.prologue, mm, latent, nope)
             : launch_kernel(mla_prologue_absorb_kernel<false>, static_cast<unsigned>(blocks), kWarps * 32, smem, stream, f.prologue, mm, latent, nope);
}

cudaError_t launch_mla_decode_uv(const ops::AttentionParams& p, int splits, void* partials, const ops::BatchedMatmulParams& mm,
                                 cudaStream_t stream) {
  auto* part = static_cast<float*>(partials);
  if (const cudaError_t err = launch_mla_decode_kernel(p, splits, part, nullptr, stream); err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(ceil_div(mm.n, int64_t{kUvWarps} * kUvRows)), static_cast<unsigned>(mm.batch),
                  static_cast<unsigned>(p.n_tokens));
  static const int late = env_flag("FRUGAL_MLA_UV_LATE_TRIGGER");
  return batched_gemv_early() ? launch_kernel(mla_combine_uv_kernel<true>, grid, kUvWarps * 32, 0, stream, p, splits, part, mm, late)
                              : launch_kernel(mla_combine_uv_kernel<false>, grid, kUvWarps * 32, 0, stream, p, splits, part, mm, late);
}

cudaError_t launch_mla_decode(const ops::AttentionParams& p, int splits, void* partials, uint32_t* counters,
                              cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  uint32_t* fused = mla_decode_fuses_combine(p, splits, counters) ? counters : nullptr;
  auto* part = static_cast<float*>(partials);
  const cudaError_t err = launch_mla_decode_kernel(p, splits, part, fused, stream);
  if (err != cudaSuccess || splits == 1 || fused != nullptr) return err;
  return launch_kernel(mla_combine_kernel, dim3(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head)),
                       kCombineThreads, 0, stream, p, splits, part);
}

}  // namespace frugal::cuda
