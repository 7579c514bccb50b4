// Decode attention over the paged KV cache, split along the sequence (FlashDecoding).
//
// Main kernel, grid (n_splits, n_head_kv * head_groups, n_seqs), 128 threads: one block takes
// the NH query heads of one GQA group that share a kv head (the K/V rows are read once for all
// of them) and one contiguous chunk of keys. Inside the block every "key group" of D/8 lanes
// (a half warp for D = 128) owns 8 dims of a row: each lane issues 16-byte loads of the K and
// V rows of 4 keys at once (8 loads in flight), the QK partial dots of 4 keys x NH heads are
// reduce-scattered over the group's lanes (few shuffles per key), and each group keeps its own
// online softmax (max, sum, NH x 8 accumulators) over its keys, so a split of any length runs
// in one pass with no block-wide barrier per tile. The groups are merged once in shared memory
// at the end. Block-table entries of the next iteration are loaded while the current one
// computes.
// With one split the block writes the normalized output. Otherwise it writes an unnormalized
// partial o plus (max, sum) per head; blocks whose chunk holds no key of the token write
// (max, sum) = (-inf, 0) only, and the combine kernel (one block per token x head) merges the
// non-empty splits, or, with split counters (DecodeTuning::combine), the last split block of each
// (token, head unit) merges them itself (decode_combine.cuh). Any number of new tokens per sequence is handled (looped), so the kernel is
// correct for every input; it is fast for one.
// Cache elements (template E): bf16, fp8 e4m3 or int8 (kv_quant.cuh). An 8-bit lane loads its
// 8 dims as 8 bytes and takes 8 keys per iteration (the same bytes in flight as bf16's 4 keys).
// fp8's per-layer k_scale is folded into the queries and v_scale into the output; int8's
// per-(key, head) scales multiply each key's score and each key's probability in the PV sum.
// Attention sinks: a token's keys are [0, min(S, lo)) and [lo, pos], two ranges walked in turn
// with one online softmax.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "backend/cuda/common.cuh"
#include "backend/cuda/decode_combine.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"
#include "backend/cuda/mma.cuh"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kU = 4;         // keys per key group per iteration (8 16-byte loads in flight per lane)
constexpr int kCombineThreads = 256;
constexpr int kMaxSplits = 4096;  // the combine keeps two floats per split in shared memory
constexpr int kMaxChunkKeys = 1024;

struct DecodeArgs {
  int chunk;         // keys per split, a multiple of the keys one block handles per iteration
  int n_splits;
  int head_groups;   // ceil(group / NH)
  float scale_log2;  // softmax scale in log2 units, times fp8's k_scale
  float v_mult;      // fp8's v_scale, else 1
  int pipelined;     // 1: the next iteration's K/V load while this one computes (FRUGAL_DECODE_PIPELINE=0: off)
  float* part_o;     // [n_tokens, n_head, n_splits, D] or nullptr when n_splits == 1
  float2* part_ml;   // [n_tokens, n_head, n_splits] (max, sum)
  uint32_t* counters;  // [n_tokens, head units] zeroed: the last split block merges; nullptr: the combine kernel
};

// Keys per key group per iteration: 4 for bf16 (16-byte loads), 8 for 8-bit caches (8-byte).
template <KvElem E>
constexpr int keys_per_group() {
  return KvElemTraits<E>::kBytes == 2 ? kU : 2 * kU;
}

// Pairwise sum of N values (N a power of two): ((v0 + v1) + (v2 + v3)) + ...
template <int N>
__device__ __forceinline__ float tree_sum(const float* v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    return tree_sum<N / 2>(v) + tree_sum<N / 2>(v + N / 2);
  }
}

// Reduce-scatter of N values over the LPK lanes of a key group (xor offsets LPK/2 .. 1): each
// step keeps half of the values (the half this lane will own) and adds the partner's copy of
// them. When fewer values than lanes remain, the last steps are plain all-reduces. On return
// v[0 .. max(1, N / LPK)) hold full sums of the indices base + f; returns base.
template <int LPK, int N>
__device__ __forceinline__ int reduce_scatter(float (&v)[N], int li) {
  int base = 0;
  int n = N;
#pragma unroll
  for (int off = LPK / 2; off >= 1; off >>= 1) {
    const bool hi = (li & off) != 0;
    if (n >= 2) {
      const int half = n / 2;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        if (i < half) {
          const float send = hi ? v[i] : v[i + half];
          const float keep = hi ? v[i + half] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
      }
      if (hi) base += half;
      n = half;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], off);
    }
  }
  return base;
}

template <int D, int NH, KvElem E>
__global__ void __launch_bounds__(kThreads) attention_decode_kernel(ops::AttentionParams p, DecodeArgs a) {
  using Vec = typename KvElemTraits<E>::Vec8;
  constexpr int EB = KvElemTraits<E>::kBytes;
  constexpr int KU = keys_per_group<E>();
  constexpr bool kInt8 = E == KvElem::kInt8;
  constexpr int LPK = D / 8;            // lanes per key group (8 dims each)
  constexpr int KPW = 32 / LPK;         // key groups per warp
  constexpr int G = kWarps * KPW;       // key groups per block
  constexpr int KPI = G * KU;           // keys per block per iteration
  constexpr int N = KU * NH;            // partial dots per lane per iteration
  constexpr int F = N / LPK > 0 ? N / LPK : 1;  // full dots each lane owns after the reduce-scatter
  static_assert(G * D >= kFusedCombineMaxSplits + 1, "the fused merge's weights fit the accumulators' shared memory");

  pdl_wait();
  __shared__ __align__(16) float sq[NH * D];            // scaled queries
  __shared__ __align__(16) float sp[G][NH][KU];         // per group: scores, then probabilities
  __shared__ float salpha[G][NH];                       // per group: rescale of the accumulators
  __shared__ float sgm[G][NH], sgl[G][NH];              // per group: final max and sum
  __shared__ float sw[G][NH];                           // merge weights of the groups
  __shared__ float sl[NH];                              // block sum (relative to the block max)
  __shared__ float smax[NH];                            // block max
  __shared__ __align__(16) float so[G][NH][D];          // per group: accumulators
  // Dynamic: the K/V staging of two iterations, [stage][key u][K, V][thread] (consecutive
  // threads, consecutive 8/16 bytes: no bank conflicts), then for int8 the scales likewise.
  extern __shared__ __align__(16) unsigned char dyn_smem[];
  Vec* stage = reinterpret_cast<Vec*>(dyn_smem);
  float* stage_sc = reinterpret_cast<float*>(dyn_smem + 2 * KU * 2 * kThreads * sizeof(Vec));

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = warp * KPW + lane / LPK, li = lane % LPK;
  const int split = blockIdx.x, seq = blockIdx.z;
  const int group = p.n_head / p.cache.n_head_kv;
  const int kvh = blockIdx.y / a.head_groups;
  const int h0 = kvh * group + (blockIdx.y % a.head_groups) * NH;
  const int n_h = min(NH, kvh * group + group - h0);
  const int q0 = p.q_start[seq], n_q = p.q_start[seq + 1] - q0, ctx = p.ctx_len[seq];
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const int bs = p.cache.block_size;
  const int64_t row_stride = static_cast<int64_t>(p.cache.n_head_kv) * D * EB;  // bytes
  const char* kbase = static_cast<const char*>(p.cache.k_cache) + (kvh * D + li * 8) * EB;
  const char* vbase = static_cast<const char*>(p.cache.v_cache) + (kvh * D + li * 8) * EB;
  const float* kscales = kInt8 ? p.cache.k_scales + kvh : nullptr;  // [slot * n_head_kv]
  const float* vscales = kInt8 ? p.cache.v_scales + kvh : nullptr;

  for (int i = 0; i < n_q; ++i) {
    const int t = q0 + i, pos = ctx - n_q + i;
    const int lo = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
    const int sink_end = p.sliding_window > 0 ? min(p.sink_tokens, lo) : 0;
    // This split's keys: [s0, s1) of the sinks, then [w0, w1) of the window (or causal range).
    // Splits divide this sequence's own context (not max_ctx_len, which a captured graph sizes
    // up to a power-of-two table width: at a 32.8k context the width gives 65,536, and chunks
    // sized from it left half of the splits, and half of the SMs' blocks, without keys).
    // a.chunk (from max_ctx_len) stays an upper bound, so no chunk outgrows kMaxChunkKeys.
    const int seq_chunk = min(a.chunk, ((ctx + a.n_splits - 1) / a.n_splits + KPI - 1) / KPI * KPI);
    const int c0 = split * seq_chunk, c1 = (split + 1) * seq_chunk;
    const int s0 = c0, s1 = min(sink_end, c1);
    const int w0 = max(lo, c0), w1 = min(pos + 1, c1);
    const int64_t ml_base = (static_cast<int64_t>(t) * p.n_head + h0) * a.n_splits + split;
    // The last split block of this (token, head unit) merges the splits (a.counters); the
    // group accumulators' shared memory is free by then.
    auto combine = [&] {
      if (a.counters != nullptr)
        fused_combine<D, kThreads>(p, a.n_splits, a.part_o, a.part_ml,
                                   a.counters + static_cast<int64_t>(t - p.q_start[0]) * gridDim.y + blockIdx.y, t, h0,
                                   n_h, &so[0][0][0]);
    };
    if (s0 >= s1 && w0 >= w1) {  // no key of this token in the chunk (block-uniform)
      if (a.part_ml != nullptr) {
        if (threadIdx.x < n_h)
          a.part_ml[ml_base + static_cast<int64_t>(threadIdx.x) * a.n_splits] = make_float2(-INFINITY, 0.f);
        combine();
      } else {  // only for a context longer than max_ctx_len (a contract violation): zeros, not garbage
        for (int idx = threadIdx.x; idx < n_h * D; idx += kThreads)
          static_cast<__nv_bfloat16*>(p.out)[static_cast<int64_t>(t) * p.ld_out + h0 * D + idx] = __float2bfloat16(0.f);
      }
      continue;
    }
    __syncthreads();  // shared memory of the previous token is no longer read
    {
      // Queries, scaled into the log2 domain; padded heads are zero.
      const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) + static_cast<int64_t>(t) * p.ld_q + h0 * D;
      float tmp[NH * D / kThreads > 0 ? NH * D / kThreads : 1];
      constexpr int kPer = NH * D / kThreads > 0 ? NH * D / kThreads : 1;
#pragma unroll
      for (int r = 0; r < kPer; ++r) {
        const int idx = r * kThreads + threadIdx.x;
        tmp[r] = idx < NH * D && idx / D < n_h ? __bfloat162float(q[idx]) : 0.f;
      }
#pragma unroll
      for (int r = 0; r < kPer; ++r) {
        const int idx = r * kThreads + threadIdx.x;
        if (idx < NH * D) sq[idx] = tmp[r] * a.scale_log2;
      }
    }
    __syncthreads();

    float m_run = -INFINITY, l_run = 0.f;  // meaningful in lanes li < NH (head li)
    float acc[NH][8];
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] = 0.f;

    for (int range = s0 < s1 ? 0 : 1; range < 2; ++range) {
    const int k0 = range == 0 ? s0 : w0, k1 = range == 0 ? s1 : w1;
    if (k0 >= k1) continue;
    const int n_it = (k1 - k0 + KPI - 1) / KPI;
    int slot[KU];
    auto load_slots = [&](int it) {
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const int j = k0 + it * KPI + g * KU + u;
        slot[u] = j < k1 ? table[j / bs] * bs + j % bs : -1;
      }
    };
    // Issues this lane's K/V pieces (and int8 scales) of the iteration whose slots are in
    // `slot` into stage st; keys past the range are zero-filled (nothing is read).
    auto issue = [&](int st) {
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        const bool ok = slot[u] >= 0;
        const int64_t off = ok ? slot[u] * row_stride : 0;
        cp_async<sizeof(Vec)>(stage + ((st * KU + u) * 2 + 0) * kThreads + threadIdx.x, kbase + off, ok);
        cp_async<sizeof(Vec)>(stage + ((st * KU + u) * 2 + 1) * kThreads + threadIdx.x, vbase + off, ok);
        if constexpr (kInt8) {
          const int64_t so = ok ? static_cast<int64_t>(slot[u]) * p.cache.n_head_kv : 0;
          cp_async<4>(stage_sc + ((st * KU + u) * 2 + 0) * kThreads + threadIdx.x, kscales + so, ok);
          cp_async<4>(stage_sc + ((st * KU + u) * 2 + 1) * kThreads + threadIdx.x, vscales + so, ok);
        }
      }
      cp_async_commit();
    };
    // Pipelined (a.pipelined): iteration it + 1's loads are in flight while it computes, and
    // the table entries of it + 2 load meanwhile. Otherwise each iteration loads, waits, computes.
    load_slots(0);
    if (a.pipelined) {
      issue(0);
      if (n_it > 1) load_slots(1);
    }
    for (int it = 0; it < n_it; ++it) {
      const int jb = k0 + it * KPI + g * KU;
      const int st = a.pipelined ? it & 1 : 0;
      if (a.pipelined) {
        if (it + 1 < n_it) {
          issue((it + 1) & 1);
        } else {
          cp_async_commit();  // an empty group keeps the wait below uniform
        }
        if (it + 2 < n_it) load_slots(it + 2);
        cp_async_wait<1>();
      } else {
        issue(0);
        if (it + 1 < n_it) load_slots(it + 1);  // the next table entries load under this wait
        cp_async_wait<0>();
      }
      // Each lane reads back only what it copied itself: the wait makes it visible, no barrier.
      Vec kr[KU], vr[KU];
      float ksc[KU], vsc[KU];
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        kr[u] = stage[((st * KU + u) * 2 + 0) * kThreads + threadIdx.x];
        vr[u] = stage[((st * KU + u) * 2 + 1) * kThreads + threadIdx.x];
        if constexpr (kInt8) {
          ksc[u] = stage_sc[((st * KU + u) * 2 + 0) * kThreads + threadIdx.x];
          vsc[u] = stage_sc[((st * KU + u) * 2 + 1) * kThreads + threadIdx.x];
        } else {
          ksc[u] = vsc[u] = 1.f;
        }
      }

      // Partial QK dots over this lane's 8 dims, index u * NH + h.
      float kf[KU][8];
#pragma unroll
      for (int u = 0; u < KU; ++u) kv8_to_float<E>(kr[u], kf[u]);
      float s[N];
#pragma unroll
      for (int h = 0; h < NH; ++h) {
        const float4 qa = *reinterpret_cast<const float4*>(&sq[h * D + li * 8]);
        const float4 qb = *reinterpret_cast<const float4*>(&sq[h * D + li * 8 + 4]);
#pragma unroll
        for (int u = 0; u < KU; ++u) {
          float d = qa.x * kf[u][0];
          d = fmaf(qa.y, kf[u][1], d);
          d = fmaf(qa.z, kf[u][2], d);
          d = fmaf(qa.w, kf[u][3], d);
          d = fmaf(qb.x, kf[u][4], d);
          d = fmaf(qb.y, kf[u][5], d);
          d = fmaf(qb.z, kf[u][6], d);
          d = fmaf(qb.w, kf[u][7], d);
          s[u * NH + h] = kInt8 ? d * ksc[u] : d;
        }
      }
      const int base = reduce_scatter<LPK, N>(s, li);
#pragma unroll
      for (int f = 0; f < F; ++f) {
        const int idx = base + f, u = idx / NH, h = idx % NH;
        sp[g][h][u] = jb + u < k1 ? s[f] : -INFINITY;
      }
      __syncwarp();
      if (li < NH) {  // online softmax of head li over the group's keys
        float sc[KU];
#pragma unroll
        for (int u = 0; u < KU; u += 4) {
          const float4 v4 = *reinterpret_cast<const float4*>(&sp[g][li][u]);
          sc[u] = v4.x, sc[u + 1] = v4.y, sc[u + 2] = v4.z, sc[u + 3] = v4.w;
        }
        float m_new = m_run;
#pragma unroll
        for (int u = 0; u < KU; u += 2) m_new = fmaxf(m_new, fmaxf(sc[u], sc[u + 1]));
        float alpha = 1.f;
        float pr[KU];
#pragma unroll
        for (int u = 0; u < KU; ++u) pr[u] = 0.f;
        if (m_new != -INFINITY) {
          alpha = exp2f(m_run - m_new);  // 0 while m_run is -inf
#pragma unroll
          for (int u = 0; u < KU; ++u) pr[u] = exp2f(sc[u] - m_new);
        }
        l_run = l_run * alpha + tree_sum<KU>(pr);
        m_run = m_new;
#pragma unroll
        for (int u = 0; u < KU; u += 4)
          *reinterpret_cast<float4*>(&sp[g][li][u]) = make_float4(pr[u], pr[u + 1], pr[u + 2], pr[u + 3]);
        salpha[g][li] = alpha;
      }
      __syncwarp();
#pragma unroll
      for (int h = 0; h < NH; ++h) {
        const float al = salpha[g][h];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] *= al;
      }
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        float vf[8];
        kv8_to_float<E>(vr[u], vf);
#pragma unroll
        for (int h = 0; h < NH; ++h) {
          const float pu = kInt8 ? sp[g][h][u] * vsc[u] : sp[g][h][u];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(pu, vf[e], acc[h][e]);
        }
      }
      __syncwarp();  // sp / salpha are rewritten next iteration
    }
    }  // ranges

    // Merge the key groups: each group's state goes to shared memory, then per head the block
    // max, the groups' weights and the block sum.
    if (li < NH) {
      sgm[g][li] = m_run;
      sgl[g][li] = l_run;
    }
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      *reinterpret_cast<float4*>(&so[g][h][li * 8]) = make_float4(acc[h][0], acc[h][1], acc[h][2], acc[h][3]);
      *reinterpret_cast<float4*>(&so[g][h][li * 8 + 4]) = make_float4(acc[h][4], acc[h][5], acc[h][6], acc[h][7]);
    }
    __syncthreads();
    if (threadIdx.x < NH) {
      const int h = threadIdx.x;
      float m = -INFINITY;
      for (int gg = 0; gg < G; ++gg) m = fmaxf(m, sgm[gg][h]);
      float l = 0.f;
      for (int gg = 0; gg < G; ++gg) {
        const float w = sgm[gg][h] == -INFINITY ? 0.f : exp2f(sgm[gg][h] - m);
        sw[gg][h] = w;
        l += w * sgl[gg][h];
      }
      smax[h] = m;
      sl[h] = l;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < n_h * D; idx += kThreads) {
      const int h = idx / D, d = idx % D;
      float o = 0.f;
#pragma unroll
      for (int gg = 0; gg < G; ++gg) o = fmaf(sw[gg][h], so[gg][h][d], o);
      if constexpr (E == KvElem::kFp8) o *= a.v_mult;
      if (a.part_o == nullptr) {
        const float l = sl[h];
        static_cast<__nv_bfloat16*>(p.out)[static_cast<int64_t>(t) * p.ld_out + (h0 + h) * D + d] =
            __float2bfloat16(l > 0.f ? o / l : 0.f);
      } else {
        a.part_o[(ml_base + static_cast<int64_t>(h) * a.n_splits) * D + d] = o;
        if (d == 0) a.part_ml[ml_base + static_cast<int64_t>(h) * a.n_splits] = make_float2(smax[h], sl[h]);
      }
    }
    if (a.part_o != nullptr) combine();
  }
}

// The split weights of one (token, head) row of the combine kernels (256 threads): wts[s] =
// exp2(m_s - m) (0 for an empty split), wl[s] the split's sum, *l the weighted sum of the sums.
// Returns false when a sum of -1 flags a row its prefill block already finished
// (attention_prefill.cu). Both combine kernels run this same code, so their weights and sums
// are the same bits.
__device__ __forceinline__ bool combine_weights(const float2* ml_row, int n_splits, float* wts, float* wl, float* red,
                                                float* l) {
  __shared__ int s_done;
  if (threadIdx.x == 0) s_done = 0;
  __syncthreads();
  float m = -INFINITY;
  for (int s = threadIdx.x; s < n_splits; s += kCombineThreads) {
    const float2 ml = ml_row[s];
    if (ml.y < 0.f) s_done = 1;
    wts[s] = ml.y > 0.f ? ml.x : -INFINITY;  // an empty split holds no values
    wl[s] = ml.y;
    m = fmaxf(m, wts[s]);
  }
  m = block_max(m, red);  // syncs: s_done and wl are final
  if (s_done) return false;
  float sum = 0.f;
  for (int s = threadIdx.x; s < n_splits; s += kCombineThreads) {
    const float ms = wts[s];
    const float w = ms == -INFINITY ? 0.f : exp2f(ms - m);
    sum = fmaf(w, wl[s], sum);
    wts[s] = w;
  }
  *l = block_sum(sum, red);  // syncs: wts is complete
  return true;
}

// The shared scratch of a combine block ([n_splits] weights, [n_splits] sums, [32] reduction
// scratch, then the kernel's own per-warp sums) and the index of its (token, head) row's first
// split in the partials.
struct CombineScratch {
  float *wts, *wl, *red, *sacc;
  int64_t row0;
};
__device__ __forceinline__ CombineScratch combine_scratch(const ops::AttentionParams& p, const DecodeArgs& a,
                                                          float* smem) {
  float* wl = smem + a.n_splits;
  float* red = wl + a.n_splits;
  return {smem, wl, red, red + 32, (static_cast<int64_t>(blockIdx.x) * p.n_head + blockIdx.y) * a.n_splits};
}

// grid (n_tokens, n_head), 256 threads: merges the splits' partials with their max rescaling.
// The (max, sum) pairs of all splits are read in parallel first; then each warp sums the
// partial rows of every 8th non-empty split (VEC dims per lane, 8 rows in flight), and the
// warps' sums meet in shared memory. Empty splits (sum 0) are skipped: their rows were never
// written.
template <int D>
__global__ void __launch_bounds__(kCombineThreads) attention_combine_kernel(ops::AttentionParams p, DecodeArgs a) {
  constexpr int VEC = D / 32;
  constexpr int W = kCombineThreads / 32;
  constexpr int kBatch = 8;
  pdl_wait();
  extern __shared__ float smem[];  // combine_scratch, then [W][D] sums
  const auto [wts, wl, red, sacc, row0] = combine_scratch(p, a, smem);
  const int t = blockIdx.x, h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float l;
  if (!combine_weights(a.part_ml + row0, a.n_splits, wts, wl, red, &l)) return;
  float acc[VEC] = {};
  const float* part = a.part_o + row0 * D + lane * VEC;
  for (int s0 = warp; s0 < a.n_splits; s0 += W * kBatch) {
    float v[kBatch][VEC];
    float w[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int s = s0 + b * W;
      w[b] = s < a.n_splits ? wts[s] : 0.f;
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[b][e] = 0.f;
      if (w[b] != 0.f) {
        if constexpr (VEC == 4) {
          const float4 x = *reinterpret_cast<const float4*>(part + static_cast<int64_t>(s) * D);
          v[b][0] = x.x; v[b][1] = x.y; v[b][2] = x.z; v[b][3] = x.w;
        } else {
          const float2 x = *reinterpret_cast<const float2*>(part + static_cast<int64_t>(s) * D);
          v[b][0] = x.x; v[b][1] = x.y;
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] = fmaf(w[b], v[b][e], acc[e]);
  }
#pragma unroll
  for (int e = 0; e < VEC; ++e) sacc[warp * D + lane * VEC + e] = acc[e];
  __syncthreads();
  if (threadIdx.x < D) {
    float o = 0.f;
#pragma unroll
    for (int ww = 0; ww < W; ++ww) o += sacc[ww * D + threadIdx.x];
    static_cast<__nv_bfloat16*>(p.out)[static_cast<int64_t>(t + p.q_start[0]) * p.ld_out + h * D + threadIdx.x] =
        __float2bfloat16(l > 0.f ? o / l : 0.f);
  }
}

// grid (n_tokens, n_head, D / 32), 256 threads (DecodeTuning::kSliced): attention_combine_kernel
// with each block merging 32 dims of a row, so one token's 28 heads are 112 blocks, not 28
// (a few long sequences left the combine latency bound on 28 SMs). Every block computes the
// row's weights and sum with the same code, and every output dim sums the same splits in the
// same order (warp w: splits w, w + 8, ... ascending, one fmaf each; then the warps' sums
// 0..7), so the output is the same bits as attention_combine_kernel's. Each warp's first
// kBatch rows load before the weights are known, together with the (max, sum) pairs (one
// memory round trip for up to W x kBatch = 128 splits instead of two or three); rows of empty
// splits hold stale scratch and are selected away (never multiplied: a stale NaN adds nothing).
template <int D>
__global__ void __launch_bounds__(kCombineThreads) attention_combine_sliced_kernel(ops::AttentionParams p, DecodeArgs a) {
  constexpr int W = kCombineThreads / 32;
  constexpr int kBatch = 16;
  pdl_wait();
  extern __shared__ float smem[];  // combine_scratch, then [W][32] sums
  const auto [wts, wl, red, sacc, row0] = combine_scratch(p, a, smem);
  const int t = blockIdx.x, h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const float* part = a.part_o + row0 * D + blockIdx.z * 32 + lane;
  float v[kBatch];
  // Rows s0 + b W (the scratch holds every split's row: in bounds, if stale for empty splits).
  auto load = [&](int s0) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int s = s0 + b * W;
      v[b] = s < a.n_splits ? __ldcg(part + static_cast<int64_t>(s) * D) : 0.f;
    }
  };
  load(warp);
  float l;
  if (!combine_weights(a.part_ml + row0, a.n_splits, wts, wl, red, &l)) return;
  float acc = 0.f;
  for (int s0 = warp; s0 < a.n_splits; s0 += W * kBatch) {
    if (s0 != warp) load(s0);
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int s = s0 + b * W;
      const float w = s < a.n_splits ? wts[s] : 0.f;
      acc = fmaf(w, w != 0.f ? v[b] : 0.f, acc);  // as attention_combine_kernel: a zero weight adds 0 x 0
    }
  }
  sacc[warp * 32 + lane] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    float o = 0.f;
#pragma unroll
    for (int ww = 0; ww < W; ++ww) o += sacc[ww * 32 + threadIdx.x];
    static_cast<__nv_bfloat16*>(p.out)[static_cast<int64_t>(t + p.q_start[0]) * p.ld_out + h * D + blockIdx.z * 32 +
                                       threadIdx.x] = __float2bfloat16(l > 0.f ? o / l : 0.f);
  }
}

KvElem kv_elem(DType t) { return t == DType::kF8E4M3 ? KvElem::kFp8 : t == DType::kI8 ? KvElem::kInt8 : KvElem::kBF16; }

template <int D, KvElem E>
constexpr int keys_per_iteration() {
  return kWarps * (32 / (D / 8)) * keys_per_group<E>();
}

int keys_per_iteration(const ops::AttentionParams& p) {
  const bool wide = kv_elem(p.cache.cache_dtype) == KvElem::kBF16;  // 8-bit caches take twice the keys
  if (p.cache.head_dim == 64) return wide ? keys_per_iteration<64, KvElem::kBF16>() : keys_per_iteration<64, KvElem::kFp8>();
  return wide ? keys_per_iteration<128, KvElem::kBF16>() : keys_per_iteration<128, KvElem::kFp8>();
}

int heads_per_block(const ops::AttentionParams& p) {
  const int group = p.n_head / p.cache.n_head_kv;
  return group >= 5 ? 8 : group >= 3 ? 4 : group;  // 1, 2, 4 or 8 (padded heads compute zeros)
}

template <KvElem E>
constexpr size_t dyn_smem_bytes() {
  constexpr size_t ku = keys_per_group<E>();
  return 2 * ku * 2 * kThreads * (KvElemTraits<E>::kBytes * 8) + (E == KvElem::kInt8 ? 2 * ku * 2 * kThreads * 4 : 0);
}

// Raises the kernel's dynamic shared memory limit once (the staging passes 48 KB with the
// static part for int8).
template <int D, int NH, KvElem E>
cudaError_t configure() {
  return raise_dynamic_smem_once<attention_decode_kernel<D, NH, E>>(dyn_smem_bytes<E>());
}

template <int D, int NH, KvElem E>
int blocks_per_sm() {
  return cached_blocks_per_sm<attention_decode_kernel<D, NH, E>>(kThreads, dyn_smem_bytes<E>(), 2);
}

template <int D, KvElem E>
int occupancy_de(int nh) {
  switch (nh) {
    case 1: return blocks_per_sm<D, 1, E>();
    case 2: return blocks_per_sm<D, 2, E>();
    case 4: return blocks_per_sm<D, 4, E>();
    default: return blocks_per_sm<D, 8, E>();
  }
}

template <int D>
int occupancy_d(const ops::AttentionParams& p) {
  const int nh = heads_per_block(p);
  switch (kv_elem(p.cache.cache_dtype)) {
    case KvElem::kFp8: return occupancy_de<D, KvElem::kFp8>(nh);
    case KvElem::kInt8: return occupancy_de<D, KvElem::kInt8>(nh);
    default: return occupancy_de<D, KvElem::kBF16>(nh);
  }
}

int occupancy(const ops::AttentionParams& p) {
  return p.cache.head_dim == 64 ? occupancy_d<64>(p) : occupancy_d<128>(p);
}

int chunk_for(const ops::AttentionParams& p, int n_splits) {
  const int kpi = keys_per_iteration(p);
  const int64_t per = ceil_div(p.max_ctx_len, n_splits);
  return static_cast<int>(ceil_div(per, kpi) * kpi);
}

template <int D, int NH, KvElem E>
cudaError_t launch_dn(const ops::AttentionParams& p, const DecodeArgs& a, cudaStream_t stream) {
  const int n_units = p.cache.n_head_kv * a.head_groups;
  dim3 grid(static_cast<unsigned>(a.n_splits), static_cast<unsigned>(n_units), static_cast<unsigned>(p.n_seqs));
  if (cudaError_t e = configure<D, NH, E>(); e != cudaSuccess) return e;
  cudaError_t e = launch_kernel(attention_decode_kernel<D, NH, E>, grid, kThreads, dyn_smem_bytes<E>(), stream, p, a);
  if (e != cudaSuccess || a.part_o == nullptr || a.counters != nullptr) return e;
  return launch_attention_combine(p, a.n_splits, a.part_o, a.part_ml, stream);
}

template <int D, KvElem E>
cudaError_t launch_de(const ops::AttentionParams& p, const DecodeArgs& a, cudaStream_t stream) {
  switch (heads_per_block(p)) {
    case 1: return launch_dn<D, 1, E>(p, a, stream);
    case 2: return launch_dn<D, 2, E>(p, a, stream);
    case 4: return launch_dn<D, 4, E>(p, a, stream);
    default: return launch_dn<D, 8, E>(p, a, stream);
  }
}

template <int D>
cudaError_t launch_d(const ops::AttentionParams& p, const DecodeArgs& a, cudaStream_t stream) {
  switch (kv_elem(p.cache.cache_dtype)) {
    case KvElem::kFp8: return launch_de<D, KvElem::kFp8>(p, a, stream);
    case KvElem::kInt8: return launch_de<D, KvElem::kInt8>(p, a, stream);
    default: return launch_de<D, KvElem::kBF16>(p, a, stream);
  }
}

// Reads one DecodeTuning knob from the environment: the value of the first matching name, else dflt.
int env_choice(const char* name, std::initializer_list<std::pair<const char*, int>> names, int dflt) {
  const char* e = std::getenv(name);
  if (e == nullptr) return dflt;
  for (const auto& [n, v] : names)
    if (std::strcmp(e, n) == 0) return v;
  return dflt;
}

DecodeTuning tuning_from_env() {
  DecodeTuning t;
  t.mma_stages = env_choice("FRUGAL_DECODE_MMA_STAGES", {{"2", 2}, {"3", 3}, {"4", 4}}, 0);
  t.mma_warps = env_choice("FRUGAL_DECODE_MMA_WARPS", {{"4", 4}, {"8", 8}}, 0);
  t.combine = env_choice("FRUGAL_DECODE_COMBINE",
                         {{"auto", DecodeTuning::kAuto},
                          {"separate", DecodeTuning::kSeparate},
                          {"fused", DecodeTuning::kFused},
                          {"sliced", DecodeTuning::kSliced}},
                         DecodeTuning::kSliced);
  t.warp_grain = env_choice("FRUGAL_DECODE_SPLIT_GRAIN", {{"warp", 1}, {"block", 0}}, 1) == 1;
  if (const char* e = std::getenv("FRUGAL_DECODE_SPLITS")) t.splits = std::max(0, std::atoi(e));
  if (const char* e = std::getenv("FRUGAL_DECODE_WHOLE_UNITS")) t.whole_units = std::max(0, std::atoi(e));
  t.table_prefetch = env_choice("FRUGAL_DECODE_TABLE_PREFETCH", {{"1", 1}, {"0", 0}}, 0) == 1;
  t.l2_prefetch = env_choice("FRUGAL_DECODE_L2_PREFETCH", {{"1", 1}, {"0", 0}}, 0) == 1;
  return t;
}

// Read from the environment on first use; process-wide like g_mma (attention_decode_mma.cu).
bool g_tuning_set = false;
DecodeTuning g_tuning;

bool decode_pipeline_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FRUGAL_DECODE_PIPELINE");
    return !(e != nullptr && e[0] == '0');
  }();
  return on;
}

bool aligned(const void* ptr, uintptr_t n) { return (reinterpret_cast<uintptr_t>(ptr) & (n - 1)) == 0; }

}  // namespace

DecodeTuning decode_tuning() {
  if (!g_tuning_set) {
    g_tuning = tuning_from_env();
    g_tuning_set = true;
  }
  return g_tuning;
}

int decode_whole_units(int n_sms) {
  const int w = decode_tuning().whole_units;
  return w >= 0 ? w : std::max(1, n_sms / 4);
}

void set_decode_tuning(const DecodeTuning& t) {
  g_tuning = t;
  g_tuning_set = true;
}

bool decode_fused_combine(const ops::AttentionParams& p, int n_splits, int units, int rows, const uint32_t* counters) {
  if (counters == nullptr || n_splits <= 1 || n_splits > kFusedCombineMaxSplits ||
      int64_t{p.n_tokens} * units > kDecodeCounters)
    return false;
  switch (decode_tuning().combine) {
    case DecodeTuning::kSeparate:
    case DecodeTuning::kSliced: return false;
    case DecodeTuning::kFused: return true;
    default:  // the merging block reads rows x n_splits partial rows: fused while that stays short
      return static_cast<size_t>(rows) * n_splits * p.cache.head_dim * sizeof(float) <= kFusedCombineAutoBytes;
  }
}

cudaError_t prepare_attention_decode() {
  // Sets every instantiation's shared-memory limit and caches its occupancy now, so neither
  // host call happens first inside a graph capture.
  int sum = 0;
  for (int nh : {1, 2, 4, 8}) {
    sum += occupancy_de<64, KvElem::kBF16>(nh) + occupancy_de<128, KvElem::kBF16>(nh);
    sum += occupancy_de<64, KvElem::kFp8>(nh) + occupancy_de<128, KvElem::kFp8>(nh);
    sum += occupancy_de<64, KvElem::kInt8>(nh) + occupancy_de<128, KvElem::kInt8>(nh);
  }
  (void)sum;
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return prepare_attention_decode_mma();
}

bool attention_decode_supported(const ops::AttentionParams& p) {
  const auto& c = p.cache;
  // Row loads are 16 bytes (bf16) or 8 bytes (fp8, int8) per lane.
  const bool q8 = c.cache_dtype == DType::kF8E4M3 || c.cache_dtype == DType::kI8;
  const uintptr_t al = q8 ? 8 : 16;
  const bool cache_ok = c.cache_dtype == DType::kBF16 || c.cache_dtype == DType::kF8E4M3 ||
                        (c.cache_dtype == DType::kI8 && c.k_scales != nullptr && c.v_scales != nullptr);
  return p.act_dtype == DType::kBF16 && cache_ok && (c.head_dim == 64 || c.head_dim == 128) &&
         aligned(c.k_cache, al) && aligned(c.v_cache, al) && c.n_head_kv > 0 && p.n_head % c.n_head_kv == 0 &&
         p.max_ctx_len > 0 && c.block_size > 0;
}

// One full wave of resident blocks, chunks no shorter than one block iteration (shorter ones
// would only add combine work). A block runs its chunk in one pass, so long chunks need no cap.
// From decode_whole_units(n_sms) units, one block a unit: the splits' combine (a second kernel,
// or the last blocks' merge) costs more than the SMs left idle gain.
int decode_split_count(const ops::AttentionParams& p, int n_sms, int64_t units, int kpi, int occupancy) {
  int64_t hi = ceil_div(p.max_ctx_len, kpi);
  if (hi > kMaxSplits) hi = kMaxSplits;
  if (const int forced = decode_tuning().splits; forced > 0) return static_cast<int>(forced < hi ? forced : (hi < 1 ? 1 : hi));
  const int whole = decode_whole_units(n_sms);
  const int64_t want = whole > 0 && units >= whole ? 1 : ceil_div(int64_t{n_sms} * occupancy, units);
  // No split longer than kMaxChunkKeys: in a large batch "one wave" asks for one or two splits,
  // and a single long sequence would then run its whole context in one block while the rest
  // of the batch waits (64 short decoders + one 10k context: 5 -> 22 ms per step). Splits past
  // a sequence's context exit at once.
  const int64_t floor_n = ceil_div(p.max_ctx_len, kMaxChunkKeys);
  int64_t n = want > hi ? hi : want;
  if (n < floor_n) n = floor_n > hi ? hi : floor_n;
  return static_cast<int>(n < 1 ? 1 : n);
}

int attention_decode_splits(const ops::AttentionParams& p, int n_sms) {
  if (attention_decode_mma_applies(p)) return attention_decode_mma_splits(p, n_sms);
  const int group = p.n_head / p.cache.n_head_kv;
  const int64_t units = int64_t{p.n_seqs} * p.cache.n_head_kv * ceil_div(group, heads_per_block(p));
  return decode_split_count(p, n_sms, units, keys_per_iteration(p), occupancy(p));
}

size_t attention_decode_scratch_bytes(const ops::AttentionParams& p, int n_splits) {
  if (n_splits <= 1) return 0;
  return static_cast<size_t>(p.n_tokens) * p.n_head * n_splits * (p.cache.head_dim + 2) * sizeof(float);
}

cudaError_t launch_attention_combine(const ops::AttentionParams& p, int n_splits, float* part_o, float2* part_ml,
                                     cudaStream_t stream) {
  DecodeArgs a{0, n_splits, 1, 0.f, 1.f, 0, part_o, part_ml, nullptr};
  const int D = p.cache.head_dim;
  const bool sliced = decode_tuning().combine == DecodeTuning::kSliced;
  // The reduction scratch after the weights and sums: [W][D] partial sums, or [W][32] sliced.
  const size_t smem = (2 * n_splits + 32 + (kCombineThreads / 32) * (sliced ? 32 : D)) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head), static_cast<unsigned>(sliced ? D / 32 : 1));
  if (sliced)
    return D == 64 ? launch_kernel(attention_combine_sliced_kernel<64>, grid, kCombineThreads, smem, stream, p, a)
                   : launch_kernel(attention_combine_sliced_kernel<128>, grid, kCombineThreads, smem, stream, p, a);
  return D == 64 ? launch_kernel(attention_combine_kernel<64>, grid, kCombineThreads, smem, stream, p, a)
                 : launch_kernel(attention_combine_kernel<128>, grid, kCombineThreads, smem, stream, p, a);
}

cudaError_t launch_attention_decode(const ops::AttentionParams& p, int n_splits, void* partials, uint32_t* counters,
                                    cudaStream_t stream, int n_sms) {
  if (p.n_tokens == 0 || p.n_seqs == 0) return cudaSuccess;
  if (attention_decode_mma_applies(p)) return launch_attention_decode_mma(p, n_splits, partials, counters, stream, n_sms);
  const int group = p.n_head / p.cache.n_head_kv;
  const bool fp8 = p.cache.cache_dtype == DType::kF8E4M3;
  DecodeArgs a{chunk_for(p, n_splits), n_splits, static_cast<int>(ceil_div(group, heads_per_block(p))),
               p.scale * 1.4426950408889634f * (fp8 ? p.cache.k_scale : 1.f), fp8 ? p.cache.v_scale : 1.f,
               decode_pipeline_enabled() ? 1 : 0, nullptr, nullptr, nullptr};
  if (n_splits > 1) {
    a.part_o = static_cast<float*>(partials);
    a.part_ml = reinterpret_cast<float2*>(a.part_o + static_cast<size_t>(p.n_tokens) * p.n_head * n_splits * p.cache.head_dim);
    // The merge's weights (n_h x (n_splits + 1) floats) reuse the group accumulators (G x NH x D
    // floats, G x D = 1024 for either head dim), enough for kFusedCombineMaxSplits splits.
    if (decode_fused_combine(p, n_splits, p.cache.n_head_kv * a.head_groups, heads_per_block(p), counters))
      a.counters = counters;
  }
  return p.cache.head_dim == 64 ? launch_d<64>(p, a, stream) : launch_d<128>(p, a, stream);
}

}  // namespace frugal::cuda
