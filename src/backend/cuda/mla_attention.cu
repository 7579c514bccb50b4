// MLA's whole attention part of a DeepSeek layer for one decode token in one persistent kernel
// (the fused op mla_attention, ops/params.h). At V2-Lite's batch 1 the sequence is seven dependent
// launches a layer (norm, q / kv_a GEMV, prologue, W_abs, MLA decode, merge + W_UV, o GEMV):
// ~44 us a layer on the H100 for 28 MB of weights that take ~9 us at the copy rate, each launch
// mostly its ramp and tail (docs/perf/2026-12-06-session50.md). Here one block an SM does every
// step, the steps apart by grid-wide barriers, and the weights do not wait for the chain: before
// the PDL wait each block copies its rows of the q / kv_a and o projections into shared memory
// (cp.async; no kernel writes weights) and asks L2 for its rows of W_abs and W_UV, so they stream
// under the previous kernel's tail and under the steps before them.
//   1. xn = rms_norm(residual) (every block, the 4 KB row), then the block's q / kv_a rows from
//      shared memory into [q | c | k_pe];                                                barrier
//   2. the last block: the latent prologue (mla_prologue.cuh: c normalized, k_pe rotated, the
//      row into the cache) and no W_abs rows; every other block: its rows of [q_abs | q_pe] =
//      W_abs[h] q[h], kAbsRows a warp at once (one round trip for them all), with its own copy
//      of each q head's q_pe rotated (q is scratch);                                      barrier
//   3. attention in the latent space: (head, split of the context) units over the blocks, keys in
//      tiles of 32 gathered through the block table, an online softmax, f32 partials;     barrier
//   4. each block merges the splits of its heads (into bf16, as the combine kernel stores them;
//      kMergeBatch split loads in flight) and runs its rows of W_UV, kUvRows a warp at once; barrier
//   5. the block's o rows from shared memory, added into the residual stream.
// The barrier is one 64-bit counter the backend zeroes once: each block adds 1 and waits until
// the counter reaches the next multiple of the grid size, so it never needs resetting (graph
// replays go on counting). It needs every block resident at once: the grid is one block an SM,
// and the host refuses the kernel unless one block fits an SM. A wait past ~2^26 polls traps.
// Data other blocks wrote is read through L2 (__ldcg). Arithmetic: f32 sums of bf16 products,
// results rounded to bf16 where the sequence stores them, so the results are within rounding of
// the sequence (not its bits: the sums run in another order); CudaFused.MlaAttention* checks it.
// Opt-in (FRUGAL_FUSE_MLA_ATTN=1): on V2-Lite batch 1 (H100) it measured 10.8% slower than the
// sequence as first written, and 6.0% slower with the rows and split loads in flight
// (docs/perf/2026-12-07-session58.md says where its time goes). FRUGAL_MLA_ATTN_EARLY=0 issues
// the weight copies after the PDL wait instead (measured 2.8% slower again). In the model the
// steps after the wait take ~39 us against ~25 in isolation (stamps, session 59: step 3 13 us
// against 6); asking L2 for step 3's cache rows with the weights, or for everything at the
// evict_last priority, measured slower; copying only the q / kv_a rows before the wait, or step
// 3's cache rows in step 1, measured no faster (docs/perf/2026-12-07-session59.md). While on, a
// lone decode token rounds differently from the same token in a larger step (not batch invariant).
// A diagnostic instance (launch_mla_attention's stamps; FRUGAL_MLA_ATTN_STAMPS in the backend)
// has thread 0 of each block stamp %globaltimer at its start, the PDL wait's end, each barrier's
// arrival and leaving and its end, to split the time after the wait between the steps.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mla_prologue.cuh"
#include "backend/cuda/mma.cuh"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kTileKeys = 32;     // attention keys a tile
constexpr int kMaxSplits = 64;
constexpr int kMaxLat = 1024;     // latent row width limit (V2 / V3: 576)
constexpr int kAbsRows = 8;       // W_abs rows a warp at once
constexpr int kUvRows = 2;        // W_UV rows a warp at once
constexpr int kMergeBatch = 8;    // split loads in flight in the merge
static_assert(kMlaAttnStamps == 12, "the stamp layout below");

struct MlaAttnArgs {
  ops::MlaAttentionParams p;
  int32_t splits;       // attention splits of each head's context
  int32_t q_rows;       // q / kv_a rows a block
  int32_t o_rows;       // o rows a block
  int32_t abs_rows;     // W_abs rows (of H x lat) a block
  int32_t uv_rows;      // W_UV rows (of H x vdim) a block
  int32_t nope;         // q's non-rotated width (rope.q - q row)
  int64_t region_a;     // bytes of shared memory the q / kv_a rows and then every step's scratch take
  int32_t early;        // 1: the weight copies before the PDL wait (FRUGAL_MLA_ATTN_EARLY, default 1)
  float* partials;      // [H][splits][rank] f32, then [H][splits] (m, l)
  unsigned long long* sync;
  unsigned long long* stamps;  // nullptr, or [stamp_slots][grid][kMlaAttnStamps] (kernels.h)
  int32_t stamp_slots;
};

static_assert(sizeof(MlaAttnArgs) <= 4000, "kernel parameters fit the 4 KB limit");

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// st: nullptr, or where thread 0 stamps the block's arrival (its slowest warp done) and its
// leaving; target: thread 0's counter value to reach, kept for the stamps' launch index.
__device__ __forceinline__ void grid_barrier(unsigned long long* ctr, unsigned long long* st = nullptr,
                                             unsigned long long* target_out = nullptr) {
  __syncthreads();
  if (threadIdx.x == 0) {
    if (st != nullptr) st[0] = global_ns();
    const unsigned long long n = gridDim.x;
    __threadfence();  // the block's writes (ordered before by the block barrier) are visible device-wide
    const unsigned long long target = (atomicAdd(ctr, 1ull) / n + 1) * n;
    uint32_t polls = 0;
    unsigned long long v;
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(ctr) : "memory");
      if (++polls == (1u << 26)) __trap();
    } while (v < target);
    __threadfence();
    if (st != nullptr) st[1] = global_ns();
    if (target_out != nullptr) *target_out = target;
  }
  __syncthreads();
}

// One warp: w against x (k bf16 each, 16-byte aligned, both in shared memory), the sum in every
// lane. k % 8 == 0. (Rows in global memory go through warp_dot_rows.)
__device__ __forceinline__ float warp_dot(const __nv_bfloat16* w, const __nv_bfloat16* x, int64_t k) {
  const int lane = threadIdx.x & 31;
  float d = 0.f;
  for (int64_t j = lane * 8; j < k; j += 256) {
    const uint4 wv = *reinterpret_cast<const uint4*>(w + j);
    d += dot_bf16x8(wv, *reinterpret_cast<const uint4*>(x + j));
  }
  return warp_sum(d);
}

// One warp: kR rows of w (row i at w0 + i * row_stride, k bf16 each, global memory, rows past n
// skipped) against x (shared memory); each lane issues its chunk of every row before it uses
// any, so the kR rows are one round trip, not kR. Row i's sum lands in every lane's out[i].
template <int kR>
__device__ __forceinline__ void warp_dot_rows(const __nv_bfloat16* w0, int64_t row_stride, int n, const __nv_bfloat16* x,
                                              int64_t k, float (&out)[kR]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kR; ++i) out[i] = 0.f;
  for (int64_t j = lane * 8; j < k; j += 256) {
    uint4 wv[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) wv[i] = i < n ? load_stream16(w0 + i * row_stride + j) : make_uint4(0, 0, 0, 0);
    const uint4 xv = *reinterpret_cast<const uint4*>(x + j);
#pragma unroll
    for (int i = 0; i < kR; ++i) out[i] += dot_bf16x8(wv[i], xv);
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) out[i] = warp_sum(out[i]);
}

__device__ __forceinline__ __nv_bfloat16* bf(void* p) { return static_cast<__nv_bfloat16*>(p); }
__device__ __forceinline__ const __nv_bfloat16* bf(const void* p) { return static_cast<const __nv_bfloat16*>(p); }

// Copies n bf16 from global (written by other blocks: through L2) into shared memory, by the block.
__device__ __forceinline__ void copy_in(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t n) {
  for (int64_t i = threadIdx.x * 8; i < n; i += kThreads * 8)
    *reinterpret_cast<uint4*>(dst + i) = __ldcg(reinterpret_cast<const uint4*>(src + i));
}

// kStamps: the diagnostic stamps into a.stamps (a second instance, so the plain one's code is untouched).
template <bool kStamps>
__global__ void __launch_bounds__(kThreads, 1) mla_attention_kernel(MlaAttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float red[32];
  // a.stamps: thread 0's %globaltimer stamps (ns), written out at the end: entry, the PDL wait's
  // end, each barrier's arrival and leaving, the end; then the launch index.
  __shared__ unsigned long long st[kMlaAttnStamps];
  unsigned long long* const stb = kStamps ? st : nullptr;
  if (stb != nullptr && threadIdx.x == 0) st[0] = global_ns();
  unsigned long long last_target = 0;  // thread 0's, after the last barrier: 4 (launch + 1) grids
  const ops::MlaAttentionParams& p = a.p;
  const ops::MatmulParams& qm = p.qkv.mm;
  const ops::MatmulParams& om = p.o;
  const ops::AttentionParams& at = p.attn.attn;
  const ops::BatchedMatmulParams& ab = p.absorb;
  const ops::BatchedMatmulParams& uv = p.attn.mm;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int64_t G = gridDim.x, b = blockIdx.x;
  const int64_t hidden = qm.k, ko = om.k;
  const int H = static_cast<int>(ab.batch), lat = at.cache.head_dim, qk = static_cast<int>(ab.k);
  const int rank = static_cast<int>(uv.k), vdim = static_cast<int>(uv.n), S = a.splits;
  // Shared memory: region A (the q / kv_a rows, then each step's scratch), the o rows, xn.
  auto* wq_s = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* wo_s = reinterpret_cast<__nv_bfloat16*>(smem + a.region_a);
  auto* xn_s = wo_s + int64_t{a.o_rows} * ko;
  const int64_t q0 = b * a.q_rows, q1 = min(qm.n, q0 + a.q_rows);
  const int64_t o0 = b * a.o_rows, o1 = min(om.n, o0 + a.o_rows);

  // Weights first: they depend on no kernel (a.early; else after the PDL wait, so the copy does
  // not share DRAM with a bandwidth-bound kernel before this one).
  if (!a.early) pdl_wait();
  if (stb != nullptr && !a.early && threadIdx.x == 0) st[1] = global_ns();
  {
    const auto* src = static_cast<const char*>(qm.w.data) + q0 * hidden * 2;
    const int64_t bytes = (q1 > q0 ? q1 - q0 : 0) * hidden * 2;
    for (int64_t i = tid * 16; i < bytes; i += kThreads * 16) cp_async16(smem + i, src + i, true);
    cp_async_commit();
    const auto* osrc = static_cast<const char*>(om.w.data) + o0 * ko * 2;
    const int64_t obytes = (o1 > o0 ? o1 - o0 : 0) * ko * 2;
    for (int64_t i = tid * 16; i < obytes; i += kThreads * 16) cp_async16(reinterpret_cast<char*>(wo_s) + i, osrc + i, true);
    cp_async_commit();
    // This block's W_abs rows (flattened over heads: row h * lat + r) and W_UV rows, into L2.
    if (tid < 32) {
      const int64_t r0 = b < G - 1 ? b * a.abs_rows : int64_t{H} * lat, r1 = min(int64_t{H} * lat, r0 + a.abs_rows);
      for (int64_t r = r0 + lane; r < r1; r += 32)
        prefetch_l2_lines(bf(ab.w) + (r / lat) * ab.stride_w + (r % lat) * ab.k, static_cast<uint32_t>(ab.k * 2));
    } else if (tid < 64) {
      const int64_t r0 = b * a.uv_rows, r1 = min(int64_t{H} * vdim, r0 + a.uv_rows);
      for (int64_t r = r0 + lane; r < r1; r += 32)
        prefetch_l2_lines(bf(uv.w) + (r / vdim) * uv.stride_w + (r % vdim) * uv.k, static_cast<uint32_t>(uv.k * 2));
    }
  }
  const uint4 kvn_w = b == G - 1 ? mla_prologue_weight(p.prologue.norm) : make_uint4(0, 0, 0, 0);
  if (a.early) pdl_wait();
  if (stb != nullptr && a.early && threadIdx.x == 0) st[1] = global_ns();

  // ---- 1. xn = rms_norm(residual); the block's q / kv_a rows ----
  {
    const ops::RmsNormParams& n = p.qkv.norm;
    const auto* x = bf(n.x);
    float ss = 0.f;
    for (int64_t i = tid * 8; i < hidden; i += kThreads * 8) {
      float v[8];
      unpack_bf16x8(*reinterpret_cast<const uint4*>(x + i), v);
#pragma unroll
      for (int e = 0; e < 8; ++e) ss += v[e] * v[e];
    }
    ss = block_sum(ss, red);
    const float inv = rsqrtf(ss / static_cast<float>(hidden) + n.eps);
    for (int64_t i = tid * 8; i < hidden; i += kThreads * 8) {
      float v[8], w[8];
      unpack_bf16x8(*reinterpret_cast<const uint4*>(x + i), v);
      unpack_bf16x8(*reinterpret_cast<const uint4*>(bf(n.weight) + i), w);
#pragma unroll
      for (int e = 0; e < 8; e += 2)
        mla_store2(xn_s + i + e, make_float2(v[e] * inv * w[e], v[e + 1] * inv * w[e + 1]));
    }
  }
  cp_async_wait<1>();  // this thread's q / kv_a copies
  __syncthreads();     // everyone's, and xn
  for (int64_t r = q0 + warp; r < q1; r += kWarps) {
    const float d = warp_dot(wq_s + (r - q0) * hidden, xn_s, hidden);
    if (lane == 0) bf(qm.y)[r] = __float2bfloat16(d);
  }
  grid_barrier(a.sync, stb ? stb + 2 : nullptr);

  // ---- 2. the latent prologue (last block); [q_abs | q_pe] rows ----
  {
    const ops::RopeParams& r = p.prologue.rope;
    const int half = r.rotary_dim / 2;
    float* sc = reinterpret_cast<float*>(smem);                         // [rotary_dim]
    auto* qh = reinterpret_cast<__nv_bfloat16*>(smem + 4 * kMaxLat);     // [2 heads][qk]
    mla_prologue_table(r, 0, sc);
    __syncthreads();
    if (b == G - 1) mla_prologue_token(p.prologue, 0, 0, kvn_w, sc, red);
    // The last block runs the prologue and takes no W_abs rows (the plan spreads them over G - 1).
    const int64_t r0 = b < G - 1 ? b * a.abs_rows : int64_t{H} * lat, r1 = min(int64_t{H} * lat, r0 + a.abs_rows);
    int64_t row = r0;
    while (row < r1) {  // the rows of one head at a time
      const int h = static_cast<int>(row / lat);
      const int64_t end = min(r1, int64_t{h + 1} * lat);
      __syncthreads();  // qh of the last head is consumed
      copy_in(qh, bf(ab.x) + int64_t{h} * ab.stride_x, qk);
      __syncthreads();
      // q_pe rotated in the copy, as the prologue rotates q (mla_rope_item's arithmetic).
      const int per = r.interleaved ? half : half / 2;
      for (int j = tid; j < per; j += kThreads)
        mla_rope_item<false>(qh + a.nope, j, half, r.interleaved, sc, [](int, float2) {});
      __syncthreads();
      // kAbsRows rows a warp at once (V2-Lite: ~70 rows a block, 9 a warp: 2 round trips, not 9).
      for (int64_t rr = row + int64_t{warp} * kAbsRows; rr < end; rr += int64_t{kWarps} * kAbsRows) {
        float d[kAbsRows];
        const int n = static_cast<int>(min(int64_t{kAbsRows}, end - rr));
        warp_dot_rows<kAbsRows>(bf(ab.w) + int64_t{h} * ab.stride_w + (rr - int64_t{h} * lat) * ab.k, ab.k, n, qh, ab.k, d);
#pragma unroll
        for (int i = 0; i < kAbsRows; ++i)
          if (lane == 0 && i < n) bf(ab.y)[int64_t{h} * ab.stride_y + (rr + i - int64_t{h} * lat)] = __float2bfloat16(d[i]);
      }
      row = end;
    }
  }
  grid_barrier(a.sync, stb ? stb + 4 : nullptr);

  // ---- 3. attention: unit (head h, split s) ----
  {
    auto* qs = reinterpret_cast<__nv_bfloat16*>(smem);                      // [lat]
    float* ps = reinterpret_cast<float*>(smem + 2 * kMaxLat);               // [kTileKeys]
    auto* kv = reinterpret_cast<__nv_bfloat16*>(smem + 2 * kMaxLat + 4 * kTileKeys);  // [kTileKeys][lat]
    const int ctx = at.ctx_len[0];
    const int chunk = (ctx + S - 1) / S;
    const int32_t* table = at.block_tables;
    const int bs = at.cache.block_size;
    const auto* cache = bf(at.cache.k_cache);
    float* part_ml = a.partials + int64_t{H} * S * rank;
    for (int64_t u = b; u < int64_t{H} * S; u += G) {
      const int h = static_cast<int>(u / S), s = static_cast<int>(u % S);
      const int lo = s * chunk, hi = min(ctx, lo + chunk);
      __syncthreads();  // the last unit's rows are consumed
      copy_in(qs, bf(at.q) + int64_t{h} * lat, lat);
      float m_run = -INFINITY, l_run = 0.f, acc[2] = {0.f, 0.f};  // dims tid, tid + kThreads of [0, rank)
      for (int k0 = lo; k0 < hi; k0 += kTileKeys) {
        __syncthreads();  // kv and ps of the last tile are consumed
        const int pieces = lat / 8;
        for (int i = tid; i < kTileKeys * pieces; i += kThreads) {
          const int key = i / pieces, c = i % pieces, pos = k0 + key;
          const bool ok = pos < hi;
          const int64_t slot = ok ? int64_t{table[pos / bs]} * bs + pos % bs : 0;
          cp_async16(kv + key * lat + c * 8, cache + slot * lat + c * 8, ok);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        for (int key = warp; key < kTileKeys; key += kWarps) {
          float d = 0.f;
          for (int c = lane; c < pieces; c += 32)
            d += dot_bf16x8(*reinterpret_cast<const uint4*>(qs + c * 8), *reinterpret_cast<const uint4*>(kv + key * lat + c * 8));
          d = warp_sum(d);
          if (lane == 0) ps[key] = k0 + key < hi ? d * at.scale : -INFINITY;
        }
        __syncthreads();
        float mt = -INFINITY;
        for (int key = 0; key < kTileKeys; ++key) mt = fmaxf(mt, ps[key]);
        const float m_new = fmaxf(m_run, mt);  // finite: a tile holds at least one key
        const float alpha = m_run == -INFINITY ? 0.f : __expf(m_run - m_new);
        float a0 = acc[0] * alpha, a1 = acc[1] * alpha, l = 0.f;
        for (int key = 0; key < kTileKeys; ++key) {
          const float e = ps[key] == -INFINITY ? 0.f : __expf(ps[key] - m_new);
          l += e;
          if (tid < rank) a0 = fmaf(e, __bfloat162float(kv[key * lat + tid]), a0);
          if (tid + kThreads < rank) a1 = fmaf(e, __bfloat162float(kv[key * lat + tid + kThreads]), a1);
        }
        acc[0] = a0, acc[1] = a1;
        l_run = l_run * alpha + l;
        m_run = m_new;
      }
      float* pa = a.partials + u * rank;
      if (tid < rank) pa[tid] = acc[0];
      if (tid + kThreads < rank) pa[tid + kThreads] = acc[1];
      if (tid == 0) part_ml[2 * u] = m_run, part_ml[2 * u + 1] = l_run;  // an empty split: (-inf, 0)
    }
  }
  grid_barrier(a.sync, stb ? stb + 6 : nullptr);

  // ---- 4. each head's splits merged, then the block's W_UV rows ----
  {
    auto* ol = reinterpret_cast<__nv_bfloat16*>(smem);  // [rank]
    float* wt = reinterpret_cast<float*>(smem + 2 * kMaxLat);  // [splits], then 1 / l
    const float* part_ml = a.partials + int64_t{H} * S * rank;
    const int64_t r0 = b * a.uv_rows, r1 = min(int64_t{H} * vdim, r0 + a.uv_rows);
    int64_t row = r0;
    while (row < r1) {
      const int h = static_cast<int>(row / vdim);
      const int64_t end = min(r1, int64_t{h + 1} * vdim);
      __syncthreads();  // ol of the last head is consumed
      if (warp == 0) {
        float m = -INFINITY;
        for (int s = lane; s < S; s += 32) m = fmaxf(m, __ldcg(part_ml + 2 * (int64_t{h} * S + s)));
        m = warp_max(m);
        float l = 0.f;
        for (int s = lane; s < S; s += 32) {
          const float ms = __ldcg(part_ml + 2 * (int64_t{h} * S + s));
          const float w = ms == -INFINITY ? 0.f : __expf(ms - m);
          wt[s] = w;
          l = fmaf(__ldcg(part_ml + 2 * (int64_t{h} * S + s) + 1), w, l);
        }
        l = warp_sum(l);
        if (lane == 0) wt[kMaxSplits] = l > 0.f ? 1.f / l : 0.f;
      }
      __syncthreads();
      // kMergeBatch splits' loads in flight before their sums (in split order, as before).
      for (int d = tid; d < rank; d += kThreads) {
        float v = 0.f;
        for (int s0 = 0; s0 < S; s0 += kMergeBatch) {
          float x[kMergeBatch];
#pragma unroll
          for (int i = 0; i < kMergeBatch; ++i)
            x[i] = s0 + i < S && wt[s0 + i] != 0.f ? __ldcg(a.partials + (int64_t{h} * S + s0 + i) * rank + d) : 0.f;
#pragma unroll
          for (int i = 0; i < kMergeBatch; ++i)
            if (s0 + i < S && wt[s0 + i] != 0.f) v = fmaf(x[i], wt[s0 + i], v);
        }
        ol[d] = __float2bfloat16(v * wt[kMaxSplits]);
      }
      __syncthreads();
      for (int64_t rr = row + int64_t{warp} * kUvRows; rr < end; rr += int64_t{kWarps} * kUvRows) {
        const int64_t dv = rr - int64_t{h} * vdim;
        float d[kUvRows];
        const int n = static_cast<int>(min(int64_t{kUvRows}, end - rr));
        warp_dot_rows<kUvRows>(bf(uv.w) + int64_t{h} * uv.stride_w + dv * uv.k, uv.k, n, ol, uv.k, d);
#pragma unroll
        for (int i = 0; i < kUvRows; ++i)
          if (lane == 0 && i < n) bf(uv.y)[int64_t{h} * uv.stride_y + dv + i] = __float2bfloat16(d[i]);
      }
      row = end;
    }
  }
  grid_barrier(a.sync, stb ? stb + 8 : nullptr, &last_target);

  // ---- 5. the block's o rows into the residual stream ----
  {
    auto* xs = reinterpret_cast<__nv_bfloat16*>(smem);  // [ko]
    copy_in(xs, bf(om.x), ko);
    cp_async_wait<0>();
    __syncthreads();
    for (int64_t r = o0 + warp; r < o1; r += kWarps) {
      float d = warp_dot(wo_s + (r - o0) * ko, xs, ko);
      if (lane == 0) {
        auto* y = bf(om.y) + r;
        if (om.accumulate) d += __bfloat162float(*y);
        *y = __float2bfloat16(d);
      }
    }
  }
  if constexpr (kStamps) {
    __syncthreads();
    if (threadIdx.x == 0) {
      st[10] = global_ns();
      const unsigned long long launch = last_target / G / 4 - 1;  // every launch passes 4 barriers of G
      st[11] = launch;
      unsigned long long* out = a.stamps + (static_cast<int64_t>(launch % a.stamp_slots) * G + b) * kMlaAttnStamps;
      for (int i = 0; i < kMlaAttnStamps; ++i) out[i] = st[i];
    }
  }
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }
bool dense_bf16(const ops::WeightView& w) {
  return w.format.scheme == ops::WeightScheme::kDense && w.format.dtype == DType::kBF16 && aligned16(w.data);
}
const uint8_t* bytes_at(const void* p, int64_t elems) { return static_cast<const uint8_t*>(p) + 2 * elems; }

// -1: unset (read FRUGAL_FUSE_MLA_ATTN on first use), 0 off, 1 on.
int g_mla_attention_mode = -1;
size_t g_mla_attention_smem = 0;  // the kernel's dynamic shared-memory limit (prepare_mla_attention)

// The weight copies before the PDL wait unless FRUGAL_MLA_ATTN_EARLY=0 (read once).
bool mla_attention_early() {
  static const bool early = [] {
    const char* e = std::getenv("FRUGAL_MLA_ATTN_EARLY");
    return !(e != nullptr && std::strcmp(e, "0") == 0);
  }();
  return early;
}

}  // namespace

bool mla_attention_enabled() {
  if (g_mla_attention_mode < 0) {
    // Off unless asked for: measured slower end to end (H100, V2-Lite batch 1, 128 / 256: 347.4
    // tok/s with it against 369.6 with the sequence; docs/perf/2026-12-07-session58.md).
    const char* e = std::getenv("FRUGAL_FUSE_MLA_ATTN");
    g_mla_attention_mode = (e != nullptr && std::strcmp(e, "1") == 0) ? 1 : 0;
  }
  return g_mla_attention_mode == 1;
}

void set_mla_attention_enabled(bool on) { g_mla_attention_mode = on ? 1 : 0; }

cudaError_t prepare_mla_attention(size_t max_smem) {
  for (auto* k : {mla_attention_kernel<false>, mla_attention_kernel<true>}) {
    const cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(max_smem));
    if (err != cudaSuccess) return err;
  }
  g_mla_attention_smem = max_smem;
  return cudaSuccess;
}

MlaAttentionPlan plan_mla_attention(const ops::MlaAttentionParams& p, int n_sms, size_t max_smem) {
  MlaAttentionPlan plan;
  const ops::RmsNormParams& n = p.qkv.norm;
  const ops::MatmulParams& qm = p.qkv.mm;
  const ops::MlaKvPrologueParams& pro = p.prologue;
  const ops::BatchedMatmulParams& ab = p.absorb;
  const ops::AttentionParams& at = p.attn.attn;
  const ops::BatchedMatmulParams& uv = p.attn.mm;
  const ops::MatmulParams& om = p.o;
  const DType bf16 = DType::kBF16;
  if (!mla_attention_enabled() || n_sms < 2) return plan;
  // One decode token of one sequence, bf16 everywhere, dense weights without bias.
  const bool one = n.rows == 1 && qm.m == 1 && ab.m == 1 && uv.m == 1 && om.m == 1 && at.n_tokens == 1 && at.n_seqs == 1 &&
                   at.n_decode_seqs == 1 && pro.norm.rows == 1;
  const bool dtypes = n.act_dtype == bf16 && n.weight_dtype == bf16 && qm.x_dtype == bf16 && qm.y_dtype == bf16 &&
                      ab.x_dtype == bf16 && ab.w_dtype == bf16 && ab.y_dtype == bf16 && at.act_dtype == bf16 &&
                      at.cache.cache_dtype == bf16 && uv.x_dtype == bf16 && uv.w_dtype == bf16 && uv.y_dtype == bf16 &&
                      om.x_dtype == bf16 && om.y_dtype == bf16 && dense_bf16(qm.w) && dense_bf16(om.w) &&
                      qm.bias == nullptr && om.bias == nullptr && !qm.accumulate;
  if (!one || !dtypes) return plan;
  const int64_t hidden = qm.k, H = ab.batch, lat = at.cache.head_dim, qk = ab.k, rank = uv.k, vdim = uv.n;
  // The data flow of the model's sequence (model/deepseek.cpp): the norm over the residual stream
  // into the projection's x; q heads then [c | k_pe] in the projection's row; W_abs over the q
  // heads into the attention's q; W_UV over the attention's rows into o's x.
  const int64_t qout = H * qk;
  const auto* y0 = static_cast<const uint8_t*>(qm.y);
  const int64_t nope = (static_cast<const uint8_t*>(pro.rope.q) - y0) / 2;
  const bool flow = n.residual == nullptr && n.dim == hidden && qm.x == n.y && qm.n == qout + lat &&
                    ab.x == qm.y && ab.stride_x == qk && pro.norm.x == bytes_at(qm.y, qout) &&
                    mla_kv_prologue_fusable(pro) && pro.rope.q == bytes_at(qm.y, nope) && nope >= 0 &&
                    nope + pro.rope.rotary_dim == qk && pro.rope.head_dim == qk && pro.rope.n_head == H &&
                    pro.norm.dim == rank && pro.kv.cache.k_cache == at.cache.k_cache && pro.kv.cache.head_dim == lat &&
                    ab.n == lat && ab.y == at.q && ab.stride_y == lat && at.n_head == H && at.cache.n_head_kv == 1 &&
                    at.cache.k_cache == at.cache.v_cache && at.sliding_window == 0 && at.sink_tokens == 0 &&
                    uv.x == at.out && uv.stride_x == lat && uv.batch == H && uv.y == om.x && uv.stride_y == vdim &&
                    om.k == H * vdim && om.n > 0 && om.y == n.x;
  const bool shapes = hidden % 8 == 0 && qk % 8 == 0 && lat % 8 == 0 && lat <= kMaxLat && rank <= lat &&
                      rank <= 2 * kThreads && rank % 8 == 0 && vdim > 0 && (H * vdim) % 8 == 0 && H > 0 &&
                      ab.stride_w % 8 == 0 && uv.stride_w % 8 == 0 && aligned16(qm.y) && aligned16(ab.w) &&
                      aligned16(uv.w) && aligned16(at.q) && aligned16(at.cache.k_cache) && aligned16(n.x) &&
                      aligned16(n.weight) && aligned16(om.x) && at.max_ctx_len > 0;
  if (!flow || !shapes) return plan;
  const int64_t G = n_sms;
  const int64_t q_rows = ceil_div(qm.n, G), o_rows = ceil_div(om.n, G);
  const int64_t abs_rows = ceil_div(H * lat, G - 1), uv_rows = ceil_div(H * vdim, G);  // the last block: the prologue
  // Region A: the q / kv_a rows, then the scratch of steps 2-5 (its largest).
  int64_t region_a = q_rows * hidden * 2;
  const int64_t step2 = 4 * kMaxLat + 2 * qk, step3 = 2 * kMaxLat + 4 * kTileKeys + 2 * kTileKeys * lat,
                step4 = 2 * kMaxLat + 4 * (kMaxSplits + 1), step5 = 2 * om.k;
  for (int64_t s : {step2, step3, step4, step5}) region_a = s > region_a ? s : region_a;
  region_a = (region_a + 15) / 16 * 16;
  const int64_t smem = region_a + o_rows * om.k * 2 + hidden * 2;
  if (static_cast<size_t>(smem) > max_smem || static_cast<size_t>(smem) > g_mla_attention_smem) return plan;
  // Splits: the heads times the splits fill the grid once, a split at least one tile.
  int64_t splits = G / H;
  const int64_t tiles = ceil_div(at.max_ctx_len, kTileKeys);
  if (splits > tiles) splits = tiles;
  if (splits > kMaxSplits) splits = kMaxSplits;
  if (splits < 1) splits = 1;
  plan.applies = true;
  plan.grid = static_cast<int>(G);
  plan.smem = static_cast<size_t>(smem);
  plan.splits = static_cast<int>(splits);
  plan.q_rows = static_cast<int>(q_rows);
  plan.o_rows = static_cast<int>(o_rows);
  plan.abs_rows = static_cast<int>(abs_rows);
  plan.uv_rows = static_cast<int>(uv_rows);
  plan.nope = static_cast<int>(nope);
  plan.region_a = region_a;
  plan.scratch_bytes = sizeof(float) * static_cast<size_t>(H * splits * (rank + 2));
  return plan;
}

cudaError_t launch_mla_attention(const ops::MlaAttentionParams& p, const MlaAttentionPlan& plan, void* partials,
                                 unsigned long long* sync, cudaStream_t stream, unsigned long long* stamps,
                                 int stamp_slots) {
  if (stamps != nullptr && stamp_slots < 1) return cudaErrorInvalidValue;
  if (plan.smem > g_mla_attention_smem) return cudaErrorInvalidValue;  // prepare_mla_attention raised less
  const MlaAttnArgs a{.p = p, .splits = plan.splits, .q_rows = plan.q_rows, .o_rows = plan.o_rows,
                      .abs_rows = plan.abs_rows, .uv_rows = plan.uv_rows, .nope = plan.nope, .region_a = plan.region_a,
                      .early = mla_attention_early() ? 1 : 0, .partials = static_cast<float*>(partials), .sync = sync,
                      .stamps = stamps, .stamp_slots = stamp_slots};
  return launch_kernel(stamps != nullptr ? mla_attention_kernel<true> : mla_attention_kernel<false>,
                       dim3(static_cast<unsigned>(plan.grid)), kThreads, plan.smem, stream, a);
}

MlaAttnStampSummary summarize_mla_attention_stamps(const unsigned long long* stamps, int stamp_slots, int grid) {
  MlaAttnStampSummary out;
  if (stamps == nullptr || stamp_slots < 1 || grid < 1) return out;
  constexpr int kFields = 2 + 5 + 5 + 4 + 1;  // start spread, wait, steps, spreads, barriers, after the wait
  std::vector<std::vector<double>> v(kFields);
  double tick = 0;
  for (int slot = 0; slot < stamp_slots; ++slot) {
    const unsigned long long* s0 = stamps + static_cast<size_t>(slot) * grid * kMlaAttnStamps;
    bool whole = true;
    for (int b = 0; b < grid && whole; ++b) {
      const unsigned long long* s = s0 + static_cast<size_t>(b) * kMlaAttnStamps;
      whole = s[0] != 0 && s[11] == s0[11];
      for (int i = 1; i <= 10 && whole; ++i) whole = s[i] >= s[i - 1];
    }
    if (!whole) continue;
    // Per stamp i: the first and last over the blocks.
    unsigned long long lo[11], hi[11];
    for (int i = 0; i <= 10; ++i) {
      lo[i] = ~0ull;
      hi[i] = 0;
      for (int b = 0; b < grid; ++b) {
        const unsigned long long t = s0[static_cast<size_t>(b) * kMlaAttnStamps + i];
        lo[i] = t < lo[i] ? t : lo[i];
        hi[i] = t > hi[i] ? t : hi[i];
      }
    }
    std::vector<unsigned long long> all;
    for (int b = 0; b < grid; ++b) all.insert(all.end(), s0 + static_cast<size_t>(b) * kMlaAttnStamps, s0 + static_cast<size_t>(b) * kMlaAttnStamps + 11);
    std::sort(all.begin(), all.end());
    for (size_t i = 1; i < all.size(); ++i) {
      const double d = static_cast<double>(all[i] - all[i - 1]);
      if (d > 0 && (tick == 0 || d < tick)) tick = d;
    }
    auto us = [](unsigned long long a, unsigned long long b) { return b > a ? static_cast<double>(b - a) / 1e3 : 0.0; };
    int f = 0;
    v[f++].push_back(us(lo[0], hi[0]));
    v[f++].push_back(us(lo[0], hi[1]));
    // Step k (0-based) runs from release[k] to its barrier's last arrival (stamp 2 + 2k), or to the end.
    for (int k = 0; k < 5; ++k) {
      const unsigned long long release = k == 0 ? hi[1] : hi[2 * k + 1];
      const int arrive = k < 4 ? 2 + 2 * k : 10;
      v[f++].push_back(us(release, hi[arrive]));
    }
    for (int k = 0; k < 5; ++k) {
      const int arrive = k < 4 ? 2 + 2 * k : 10;
      v[f++].push_back(us(lo[arrive], hi[arrive]));
    }
    for (int k = 0; k < 4; ++k) v[f++].push_back(us(hi[2 + 2 * k], hi[3 + 2 * k]));
    v[f++].push_back(us(hi[1], hi[10]));
    ++out.launches;
  }
  if (out.launches == 0) return out;
  auto median = [](std::vector<double>& x) {
    std::sort(x.begin(), x.end());
    const size_t n = x.size();
    return n % 2 == 1 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  };
  int f = 0;
  out.start_spread = median(v[f++]);
  out.wait = median(v[f++]);
  for (double& x : out.step) x = median(v[f++]);
  for (double& x : out.spread) x = median(v[f++]);
  for (double& x : out.barrier) x = median(v[f++]);
  out.after_wait = median(v[f++]);
  out.tick_ns = tick;
  return out;
}

}  // namespace frugal::cuda
