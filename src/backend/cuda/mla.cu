// Multi-head latent attention on CUDA (DeepSeek):
//  - the per-head matmuls of weight absorption as one batched GEMV launch for decode-sized m
//    (ops::BatchedMatmulParams; larger m is one strided-batched cuBLASLt matmul, cuda_backend.cpp);
//  - attention over the latent cache: one shared KV head whose K and V are the same
//    [kv_lora_rank + rope] row (MQA with K == V, head_dim up to 640), every query head of a
//    group of 16 against each cache row loaded once into shared memory, split over the context
//    for small batches (f32 partials combined by a second kernel). One block per query token,
//    so decode tokens and prefill chunks (each token causal over its own prefix) take the same
//    kernel; the generic attention kernel, one block per (token, head) re-reading every 576-wide
//    row, was 7 ms a layer for a 512-token V2-Lite prefill.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace frugal::cuda {
namespace {

constexpr int kWarps = 8;

// One warp per (batch b, output o): w[b][o, :] against x[b][i, :] for every i < m (m <= kMaxM),
// f32 accumulation in a fixed order (lane-strided, then a butterfly).
template <int kMaxM>
__global__ void __launch_bounds__(kWarps * 32) batched_gemv_kernel(ops::BatchedMatmulParams p) {
  pdl_wait();
  const int64_t b = blockIdx.y;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (o >= p.n) return;
  const uint8_t* wbase = static_cast<const uint8_t*>(p.w);
  const int64_t w_off = b * p.stride_w + o * p.k;
  const int64_t x_off = b * p.stride_x;
  float acc[kMaxM];
#pragma unroll
  for (int i = 0; i < kMaxM; ++i) acc[i] = 0.f;
  const bool vec = p.w_dtype == DType::kBF16 && p.x_dtype == DType::kBF16 && p.k % 8 == 0 && p.ld_x % 8 == 0 &&
                   p.stride_x % 8 == 0 && p.stride_w % 8 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  if (vec) {
    const auto* w = reinterpret_cast<const __nv_bfloat16*>(wbase) + w_off;
    const auto* x = static_cast<const __nv_bfloat16*>(p.x) + x_off;
    for (int64_t j = lane * 8; j < p.k; j += 32 * 8) {
      const uint4 wv = __ldg(reinterpret_cast<const uint4*>(w + j));
      const auto* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
      float wf[8];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 f = __bfloat1622float2(w2[q]);
        wf[2 * q] = f.x;
        wf[2 * q + 1] = f.y;
      }
#pragma unroll
      for (int i = 0; i < kMaxM; ++i) {
        if (i >= p.m) break;
        const uint4 xv = *reinterpret_cast<const uint4*>(x + i * p.ld_x + j);
        const auto* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float2 f = __bfloat1622float2(x2[q]);
          acc[i] += wf[2 * q] * f.x + wf[2 * q + 1] * f.y;
        }
      }
    }
  } else {
    for (int64_t j = lane; j < p.k; j += 32) {
      const float wf = load_f(p.w_dtype, wbase, w_off + j);
#pragma unroll
      for (int i = 0; i < kMaxM; ++i) {
        if (i >= p.m) break;
        acc[i] += wf * load_f(p.x_dtype, p.x, x_off + i * p.ld_x + j);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxM; ++i) {
    if (i >= p.m) break;
    float v = acc[i];
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
    if (lane == 0) store_f(p.y_dtype, p.y, b * p.stride_y + i * p.ld_y + o, v);
  }
}

}  // namespace

cudaError_t launch_batched_gemv(const ops::BatchedMatmulParams& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((p.n + kWarps - 1) / kWarps), static_cast<unsigned>(p.batch));
  if (p.m <= 4) return launch_kernel(batched_gemv_kernel<4>, grid, kWarps * 32, 0, stream, p);
  return launch_kernel(batched_gemv_kernel<kBatchedGemvMaxM>, grid, kWarps * 32, 0, stream, p);
}

namespace {
// ---- MLA decode attention ----
constexpr int kHB = 16;       // query heads per block
constexpr int kKC = 16;       // cache rows per iteration
constexpr int kMaxD = 640;    // head_dim limit (V3 / V2-Lite: 576)
constexpr int kLdS = kMaxD + 8;
constexpr int kVecCols = kMaxD / 8 / kKC;  // 8-wide column groups per thread (16 threads per head)
constexpr int kMaxSplits = 64;

// partials: [n_tokens, n_head, splits] of (m, l) and [n_tokens, n_head, splits, D] of acc.

// The sequence token t belongs to (q_start is [n_seqs + 1] prefix sums).
__device__ __forceinline__ int seq_of_token(const int32_t* q_start, int n_seqs, int t) {
  int lo = 0, hi = n_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (q_start[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}
__global__ void __launch_bounds__(kHB * kKC) mla_decode_kernel(ops::AttentionParams p, int splits, float* partials) {
  pdl_wait();
  __shared__ __align__(16) __nv_bfloat16 qs[kHB][kLdS];
  __shared__ __align__(16) __nv_bfloat16 kv[kKC][kLdS];
  __shared__ float ps[kHB][kKC];
  __shared__ float alpha_s[kHB];
  const auto& c = p.cache;
  const int D = c.head_dim, DV = D / 8;
  const int t = blockIdx.x, h0 = blockIdx.y * kHB, split = blockIdx.z;
  const int tid = threadIdx.x;
  const bool own = t < p.n_seqs && p.q_start[t] == t && p.q_start[t + 1] == t + 1;  // decode: token t is sequence t
  const int seq = own ? t : seq_of_token(p.q_start, p.n_seqs, t);
  // Token t sees the cache up to and including its own position.
  const int ctx = p.ctx_len[seq] - (p.q_start[seq + 1] - 1 - t);
  const int chunk = (ctx + splits - 1) / splits;
  const int lo = split * chunk, hi = min(ctx, lo + chunk);
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
  if (ah >= nh) return;
  const int h = h0 + ah;
  if (splits == 1) {
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
  const int64_t unit = (int64_t{t} * p.n_head + h) * splits + split;
  float* ml = partials + 2 * unit;
  float* pa = partials + int64_t{2} * p.n_tokens * p.n_head * splits + unit * D;
  if (ac == 0) { ml[0] = m_run; ml[1] = l_run; }
#pragma unroll
  for (int i = 0; i < kVecCols; ++i) {
    const int cg = ac + kKC * i;
    if (cg >= DV) break;
#pragma unroll
    for (int q = 0; q < 8; ++q) pa[cg * 8 + q] = acc[i][q];
  }
}

// grid (n_tokens, n_head): the splits' (m, l) pairs are read in parallel into shared memory and
// turned into weights once; then every thread merges its dims over the splits in split order.
__global__ void mla_combine_kernel(ops::AttentionParams p, int splits, const float* partials) {
  pdl_wait();
  __shared__ float wt[kMaxSplits];
  __shared__ float inv_s;
  const int t = blockIdx.x, h = blockIdx.y, D = p.cache.head_dim;
  const int64_t u0 = (int64_t{t} * p.n_head + h) * splits;
  const float* ml = partials + 2 * u0;
  const float* pa = partials + int64_t{2} * p.n_tokens * p.n_head * splits + u0 * D;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float m = -INFINITY;
    for (int s = lane; s < splits; s += 32) m = fmaxf(m, ml[2 * s]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float l = 0.f;
    for (int s = lane; s < splits; s += 32) {
      const float w = ml[2 * s] == -INFINITY ? 0.f : __expf(ml[2 * s] - m);
      wt[s] = w;
      l += ml[2 * s + 1] * w;
    }
    l = warp_sum(l);
    if (lane == 0) inv_s = l > 0.f ? 1.f / l : 0.f;
  }
  __syncthreads();
  const float inv = inv_s;
  auto* out = static_cast<__nv_bfloat16*>(p.out) + int64_t{t} * p.ld_out + int64_t{h} * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float a = 0.f;
    for (int s = 0; s < splits; ++s)
      if (wt[s] != 0.f) a += pa[int64_t{s} * D + d] * wt[s];
    out[d] = __float2bfloat16(a * inv);
  }
}

}  // namespace

bool mla_decode_supported(const ops::AttentionParams& p) {
  const auto& c = p.cache;
  return p.act_dtype == DType::kBF16 && c.cache_dtype == DType::kBF16 && c.n_head_kv == 1 && c.k_cache == c.v_cache &&
         c.head_dim % 8 == 0 && c.head_dim > 128 && c.head_dim <= kMaxD && p.sliding_window == 0 && p.ld_q % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && reinterpret_cast<uintptr_t>(c.k_cache) % 16 == 0 &&
         p.max_ctx_len > 0 && c.block_size > 0;
}

int mla_decode_splits(const ops::AttentionParams& p, int n_sms) {
  const int64_t units = int64_t{p.n_tokens} * ((p.n_head + kHB - 1) / kHB);
  int64_t want = (2 * int64_t{n_sms} + units - 1) / units;
  const int64_t hi = (p.max_ctx_len + kKC - 1) / kKC;  // at least one iteration a split
  if (want > hi) want = hi;
  if (want > kMaxSplits) want = kMaxSplits;
  return want < 1 ? 1 : static_cast<int>(want);
}

size_t mla_decode_scratch_bytes(const ops::AttentionParams& p, int splits) {
  if (splits <= 1) return 0;
  return sizeof(float) * static_cast<size_t>(p.n_tokens) * p.n_head * splits * (2 + p.cache.head_dim);
}

cudaError_t launch_mla_decode(const ops::AttentionParams& p, int splits, void* partials, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>((p.n_head + kHB - 1) / kHB), static_cast<unsigned>(splits));
  cudaError_t err = launch_kernel(mla_decode_kernel, grid, kHB * kKC, 0, stream, p, splits, static_cast<float*>(partials));
  if (err != cudaSuccess || splits == 1) return err;
  return launch_kernel(mla_combine_kernel, dim3(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head)), 128, 0,
                       stream, p, splits, static_cast<const float*>(partials));
}

}  // namespace frugal::cuda
