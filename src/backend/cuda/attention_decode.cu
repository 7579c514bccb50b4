// Decode attention over the paged KV cache, split along the sequence (FlashDecoding).
// grid (n_splits, n_head_kv * head_groups, n_seqs): each block takes up to kMaxHeads query heads
// that share one kv head (GQA: the K/V chunk is read once for all of them) and one chunk of
// keys, writing an unnormalized partial (o, max, sum) per head; a combine kernel merges the
// splits. With one split the block writes the output directly. Any number of new tokens per
// sequence is handled (looped), so the kernel is correct for every input; it is fast for one.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeads = 8;     // query heads per block (registers: kMaxHeads x 8 accumulators)
constexpr int kMaxChunk = 1024;  // keys per split (shared memory: kMaxHeads x chunk floats)
constexpr int kMinChunk = 64;
constexpr int kMaxSplits = 4096;

struct DecodeArgs {
  int chunk;
  int n_splits;
  int head_groups;  // ceil(group / kMaxHeads)
  float scale_log2;
  float* partials;  // [n_tokens, n_head, n_splits, D + 2] or nullptr when n_splits == 1
};

__device__ __forceinline__ void bf16x8(uint4 v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ const __nv_bfloat16* kv_row(const ops::KvCacheLayer& c, const void* base,
                                                        int64_t slot, int kvh) {
  return static_cast<const __nv_bfloat16*>(base) + (slot * c.n_head_kv + kvh) * c.head_dim;
}

// Scores of keys [k0, k1) for the block's heads into ss[hh * chunk + (j - k0)], then each head's
// max and exp-sum (ss becomes the unnormalized probabilities).
template <int D>
__device__ void scores_softmax(const ops::AttentionParams& p, const int* sslot, int kvh, int n_h,
                               int k0, int k1, int chunk, const float* sq, float* ss, float* sm, float* sl) {
  for (int j = k0 + threadIdx.x; j < k1; j += kThreads) {
    const __nv_bfloat16* krow = kv_row(p.cache, p.cache.k_cache, sslot[j - k0], kvh);
    float acc[kMaxHeads] = {};
#pragma unroll 4
    for (int c = 0; c < D / 8; ++c) {
      float kf[8];
      bf16x8(*reinterpret_cast<const uint4*>(krow + c * 8), kf);
#pragma unroll
      for (int hh = 0; hh < kMaxHeads; ++hh) {
        if (hh >= n_h) break;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[hh] = fmaf(sq[hh * D + c * 8 + e], kf[e], acc[hh]);
      }
    }
    for (int hh = 0; hh < n_h; ++hh) ss[hh * chunk + (j - k0)] = acc[hh];
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int hh = warp; hh < n_h; hh += kThreads / 32) {
    float m = -INFINITY;
    for (int j = lane; j < k1 - k0; j += 32) m = fmaxf(m, ss[hh * chunk + j]);
    m = warp_max(m);
    float l = 0.f;
    for (int j = lane; j < k1 - k0; j += 32) {
      float e = exp2f(ss[hh * chunk + j] - m);
      ss[hh * chunk + j] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) {
      sm[hh] = m;
      sl[hh] = l;
    }
  }
  __syncthreads();
}

// so[hh * D + d] = sum_j ss[hh, j] * V[j, d]: threads split into key lanes x 8-dim chunks.
template <int D>
__device__ void weighted_values(const ops::AttentionParams& p, const int* sslot, int kvh, int n_h,
                                int k0, int k1, int chunk, const float* ss, float* so) {
  constexpr int kDimChunks = D / 8, kKeyLanes = kThreads / kDimChunks;
  const int dc = threadIdx.x % kDimChunks, kl = threadIdx.x / kDimChunks;
  float acc[kMaxHeads][8] = {};
#pragma unroll 4
  for (int j = k0 + kl; j < k1; j += kKeyLanes) {
    float vf[8];
    bf16x8(*reinterpret_cast<const uint4*>(kv_row(p.cache, p.cache.v_cache, sslot[j - k0], kvh) + dc * 8), vf);
#pragma unroll
    for (int hh = 0; hh < kMaxHeads; ++hh) {
      if (hh >= n_h) break;
      const float w = ss[hh * chunk + (j - k0)];
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[hh][e] = fmaf(w, vf[e], acc[hh][e]);
    }
  }
  for (int i = threadIdx.x; i < n_h * D; i += kThreads) so[i] = 0.f;
  __syncthreads();
#pragma unroll
  for (int hh = 0; hh < kMaxHeads; ++hh) {
    if (hh >= n_h) break;
#pragma unroll
    for (int e = 0; e < 8; ++e) atomicAdd(&so[hh * D + dc * 8 + e], acc[hh][e]);
  }
  __syncthreads();
}

template <int D>
__global__ void __launch_bounds__(kThreads) attention_decode_kernel(ops::AttentionParams p, DecodeArgs a) {
  pdl_wait();
  extern __shared__ __align__(16) float smem[];
  float* sq = smem;                        // [kMaxHeads, D] scaled queries
  float* so = sq + kMaxHeads * D;          // [kMaxHeads, D] weighted values
  float* sm = so + kMaxHeads * D;          // [kMaxHeads] max
  float* sl = sm + kMaxHeads;              // [kMaxHeads] sum
  float* ss = sl + kMaxHeads;              // [kMaxHeads, chunk] scores, then probabilities
  int* sslot = reinterpret_cast<int*>(ss + kMaxHeads * a.chunk);  // [chunk] cache slots of the keys

  const int split = blockIdx.x, seq = blockIdx.z;
  const int group = p.n_head / p.cache.n_head_kv;
  const int kvh = blockIdx.y / a.head_groups;
  const int h0 = kvh * group + (blockIdx.y % a.head_groups) * kMaxHeads;
  const int n_h = min(kMaxHeads, kvh * group + group - h0);
  const int q0 = p.q_start[seq], n_q = p.q_start[seq + 1] - q0, ctx = p.ctx_len[seq];
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;

  for (int i = 0; i < n_q; ++i) {
    const int t = q0 + i, pos = ctx - n_q + i;
    const int lo = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
    const int k0 = max(lo, split * a.chunk), k1 = min(pos + 1, (split + 1) * a.chunk);
    __syncthreads();  // smem of the previous token is no longer read
    for (int idx = threadIdx.x; idx < n_h * D; idx += kThreads)
      sq[idx] = load_f(DType::kBF16, p.q, static_cast<int64_t>(t) * p.ld_q + (h0 + idx / D) * D + idx % D) *
                a.scale_log2;
    __syncthreads();
    if (k0 < k1) {
      // Block-table lookups once per key, in parallel, not once per key per phase.
      for (int j = k0 + threadIdx.x; j < k1; j += kThreads)
        sslot[j - k0] = table[j / p.cache.block_size] * p.cache.block_size + j % p.cache.block_size;
      __syncthreads();
      scores_softmax<D>(p, sslot, kvh, n_h, k0, k1, a.chunk, sq, ss, sm, sl);
      weighted_values<D>(p, sslot, kvh, n_h, k0, k1, a.chunk, ss, so);
    } else {
      for (int idx = threadIdx.x; idx < n_h * D; idx += kThreads) so[idx] = 0.f;
      if (threadIdx.x < n_h) {
        sm[threadIdx.x] = -INFINITY;
        sl[threadIdx.x] = 0.f;
      }
      __syncthreads();
    }
    for (int idx = threadIdx.x; idx < n_h * D; idx += kThreads) {
      const int hh = idx / D, d = idx % D;
      if (a.partials == nullptr) {
        float v = sl[hh] > 0.f ? so[idx] / sl[hh] : 0.f;
        store_f(DType::kBF16, p.out, static_cast<int64_t>(t) * p.ld_out + (h0 + hh) * D + d, v);
      } else {
        float* part = a.partials + ((static_cast<int64_t>(t) * p.n_head + h0 + hh) * a.n_splits + split) * (D + 2);
        part[d] = so[idx];
        if (d == 0) {
          part[D] = sm[hh];
          part[D + 1] = sl[hh];
        }
      }
    }
  }
}

// grid (n_tokens, n_head), D threads: merges the splits' partials with their max rescaling.
// The splits' (max, sum) pairs are read in parallel into shared memory first; the per-dim
// loop then issues independent loads (a dependent chain over splits would cost a full memory
// latency per split).
template <int D>
__global__ void attention_combine_kernel(ops::AttentionParams p, DecodeArgs a) {
  pdl_wait();
  extern __shared__ float wts[];  // [n_splits] weights, then [32] reduction scratch
  float* red = wts + a.n_splits;
  const int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const float* part = a.partials + (static_cast<int64_t>(t) * p.n_head + h) * a.n_splits * (D + 2);
  float m = -INFINITY;
  for (int s = threadIdx.x; s < a.n_splits; s += D) {
    const float ms = part[s * (D + 2) + D], ls = part[s * (D + 2) + D + 1];
    wts[s] = ls > 0.f ? ms : -INFINITY;  // an empty split holds no values
    m = fmaxf(m, wts[s]);
  }
  m = block_max(m, red);
  float l = 0.f;
  for (int s = threadIdx.x; s < a.n_splits; s += D) {
    const float w = wts[s] == -INFINITY ? 0.f : exp2f(wts[s] - m);
    l += w * part[s * (D + 2) + D + 1];
    wts[s] = w;
  }
  l = block_sum(l, red);  // syncs: wts is complete below
  // Unconditional loads into 8 accumulators: 8 loads in flight per round (an empty split's
  // values are written as zeros, and its weight is 0).
  float acc[8] = {};
  int s = 0;
  for (; s + 8 <= a.n_splits; s += 8) {
#pragma unroll
    for (int u = 0; u < 8; ++u) acc[u] = fmaf(wts[s + u], part[(s + u) * (D + 2) + d], acc[u]);
  }
  for (; s < a.n_splits; ++s) acc[0] = fmaf(wts[s], part[s * (D + 2) + d], acc[0]);
  float o = 0.f;
#pragma unroll
  for (int u = 0; u < 8; ++u) o += acc[u];
  store_f(DType::kBF16, p.out, static_cast<int64_t>(t) * p.ld_out + h * D + d, l > 0.f ? o / l : 0.f);
}

int chunk_for(const ops::AttentionParams& p, int n_splits) {
  int per = static_cast<int>(ceil_div(p.max_ctx_len, n_splits));
  return static_cast<int>(ceil_div(per, kMinChunk) * kMinChunk);
}

template <int D>
cudaError_t launch_d(const ops::AttentionParams& p, const DecodeArgs& a, cudaStream_t stream) {
  const size_t smem = (2 * kMaxHeads * D + 2 * kMaxHeads + static_cast<size_t>(kMaxHeads + 1) * a.chunk) * sizeof(float);
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(attention_decode_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>((2 * kMaxHeads * D + 2 * kMaxHeads + (kMaxHeads + 1) * kMaxChunk) * sizeof(float)));
    if (e != cudaSuccess) return e;
    configured = true;
  }
  const int n_units = p.cache.n_head_kv * a.head_groups;
  dim3 grid(static_cast<unsigned>(a.n_splits), static_cast<unsigned>(n_units), static_cast<unsigned>(p.n_seqs));
  cudaError_t e = launch_kernel(attention_decode_kernel<D>, grid, kThreads, smem, stream, p, a);
  if (e != cudaSuccess || a.partials == nullptr) return e;
  const size_t combine_smem = (a.n_splits + 32) * sizeof(float);
  return launch_kernel(attention_combine_kernel<D>, dim3(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head)), D, combine_smem, stream, p, a);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

bool attention_decode_supported(const ops::AttentionParams& p) {
  const auto& c = p.cache;
  return p.act_dtype == DType::kBF16 && c.cache_dtype == DType::kBF16 &&
         (c.head_dim == 64 || c.head_dim == 128) && aligned16(c.k_cache) && aligned16(c.v_cache) &&
         c.n_head_kv > 0 && p.n_head % c.n_head_kv == 0 && p.max_ctx_len > 0;
}

int attention_decode_splits(const ops::AttentionParams& p, int n_sms) {
  const int group = p.n_head / p.cache.n_head_kv;
  const int64_t units = int64_t{p.n_seqs} * p.cache.n_head_kv * ceil_div(group, kMaxHeads);
  // Enough blocks for two waves of the machine, chunks no longer than kMaxChunk, no shorter
  // than kMinChunk (below that the combine costs more than it spreads).
  int64_t want = ceil_div(2 * int64_t{n_sms}, units);
  int64_t lo = ceil_div(p.max_ctx_len, kMaxChunk), hi = ceil_div(p.max_ctx_len, kMinChunk);
  if (hi > kMaxSplits) hi = kMaxSplits;  // combine keeps one float per split in shared memory
  int64_t n = want < lo ? lo : (want > hi ? hi : want);
  return static_cast<int>(n < 1 ? 1 : n);
}

size_t attention_decode_scratch_bytes(const ops::AttentionParams& p, int n_splits) {
  if (n_splits <= 1) return 0;
  return static_cast<size_t>(p.n_tokens) * p.n_head * n_splits * (p.cache.head_dim + 2) * sizeof(float);
}

cudaError_t launch_attention_decode(const ops::AttentionParams& p, int n_splits, void* partials,
                                    cudaStream_t stream) {
  if (p.n_tokens == 0 || p.n_seqs == 0) return cudaSuccess;
  const int group = p.n_head / p.cache.n_head_kv;
  DecodeArgs a{chunk_for(p, n_splits), n_splits, static_cast<int>(ceil_div(group, kMaxHeads)),
               p.scale * 1.4426950408889634f, n_splits > 1 ? static_cast<float*>(partials) : nullptr};
  return p.cache.head_dim == 64 ? launch_d<64>(p, a, stream) : launch_d<128>(p, a, stream);
}

}  // namespace frugal::cuda
