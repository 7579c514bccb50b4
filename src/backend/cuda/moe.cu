// DeepSeek MoE routing and per-row scaling (ops::MoeRouteParams, ops::ScaleRowsParams), and the
// router (its input norm, its matmul and the routing) in one kernel (ops::MoeRouterParams).
// Routing is one warp per token (n_experts <= kMoeMaxExperts, top_k <= kMoeMaxTopK), in fp32,
// with the reference's selection and tie rule (lower id); the softmax sums lane-strided. The
// top-k is one pass of ranks up to 64 values (FRUGAL_MOE_ROUTE_RANK=0: the arg-max rounds).
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_layout.cuh"
#include "backend/cuda/norm_prologue.cuh"

namespace frugal::cuda {
namespace {

constexpr int kRouteWarps = 4;

// The warp's (value, index) maximum, lower index on ties; index -1 (value -inf) for none.
__device__ __forceinline__ void warp_arg_max(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) v = ov, i = oi;
  }
}

// Index of the largest v[j] (j < n) whose taken[j] is false, lower index on ties, over the warp.
__device__ int warp_arg_max_untaken(const float* v, int n, const bool* taken) {
  const int lane = threadIdx.x & 31;
  float best = -INFINITY;
  int bi = -1;
  for (int j = lane; j < n; j += 32)
    if (!taken[j] && (bi < 0 || v[j] > best)) best = v[j], bi = j;
  warp_arg_max(best, bi);
  return bi;
}

// The rank selection below takes up to kRankMax values (two a lane).
constexpr int kRankMax = 64;

// A choice's order as an integer: a larger value has a larger key, +0 and -0 share one, and NaN
// is below every number (so the ranks below are a permutation whatever the logits hold).
__device__ __forceinline__ uint32_t order_key(float v) {
  if (v != v) return 0u;
  const uint32_t u = __float_as_uint(v == 0.f ? 0.f : v);
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// The k largest of v[0, n) (n <= kRankMax, k <= kMoeMaxTopK) over the warp, largest first and the
// lower index first on ties (the arg-max rounds' order), into top[0, k) in shared memory. Each
// value's rank is the number of values ahead of it, counted in one pass over the keys, so no
// step waits on a warp-wide arg-max before it (k rounds of a butterfly did).
__device__ void warp_top_k_rank(const float* v, int n, int k, uint32_t* key, int32_t* top) {
  const int lane = threadIdx.x & 31;
  for (int j = lane; j < n; j += 32) key[j] = order_key(v[j]);
  __syncwarp();
  const int j0 = lane, j1 = lane + 32;
  const uint32_t k0 = j0 < n ? key[j0] : 0u, k1 = j1 < n ? key[j1] : 0u;
  int r0 = 0, r1 = 0;
#pragma unroll 8
  for (int i = 0; i < n; ++i) {
    const uint32_t ki = key[i];
    r0 += ki > k0 || (ki == k0 && i < j0);
    r1 += ki > k1 || (ki == k1 && i < j1);
  }
  if (j0 < n && r0 < k) top[r0] = j0;
  if (j1 < n && r1 < k) top[r1] = j1;
  __syncwarp();
}

// A warp's routing arrays in shared memory. `sel` is the selection's scratch: the arg-max
// rounds' taken flags, or the rank selection's keys and result.
struct RankScratch {
  uint32_t key[kRankMax];
  int32_t top[ops::kMoeMaxTopK];
};
union SelectScratch {
  bool taken[ops::kMoeMaxExperts];
  RankScratch rank;
};
struct WarpRouteScratch {
  float score[ops::kMoeMaxExperts], choice[ops::kMoeMaxExperts], group[ops::kMoeMaxExperts];
  SelectScratch sel;
  bool kept[ops::kMoeMaxExperts];
};

// Routes token t from its f32 logits l (global or shared memory) with the warp, in the warp's
// scratch s; lane 0 writes the outputs. The top-k (and the group choice) by rank where the
// values number at most rank_max (kRankMax, or 0: never), else by arg-max rounds; both pick the
// same experts in the same order.
__device__ void route_token(const ops::MoeRouteParams& p, int64_t t, const float* l, WarpRouteScratch& s, int rank_max) {
  const int lane = threadIdx.x & 31;
  const int E = p.n_experts, K = p.top_k;
  float *score = s.score, *choice = s.choice, *group = s.group;
  bool* kept = s.kept;
  if (p.scoring == ops::MoeScoring::kSoftmax) {
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, l[e]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.f;
    for (int e = lane; e < E; e += 32) sum += score[e] = expf(l[e] - mx);
    sum = warp_sum(sum);
    for (int e = lane; e < E; e += 32) score[e] /= sum;
  } else {
    for (int e = lane; e < E; e += 32) score[e] = 1.f / (1.f + expf(-l[e]));
  }
  for (int e = lane; e < E; e += 32) choice[e] = score[e] + (p.bias ? load_f(p.bias_dtype, p.bias, e) : 0.f);
  __syncwarp();
  if (p.method != ops::MoeTopk::kGreedy) {
    const int G = p.n_group, per = E / G;
    for (int g = lane; g < G; g += 32) {
      const float* c = choice + g * per;
      float a = -INFINITY, b = -INFINITY;  // the largest and second largest of the group
      for (int e = 0; e < per; ++e) {
        if (c[e] > a) { b = a; a = c[e]; } else if (c[e] > b) { b = c[e]; }
      }
      group[g] = p.method == ops::MoeTopk::kGroupLimitedGreedy ? a : a + (per > 1 ? b : 0.f);
      kept[g] = false;
    }
    __syncwarp();
    if (G <= rank_max && p.topk_group <= ops::kMoeMaxTopK) {
      warp_top_k_rank(group, G, p.topk_group, s.sel.rank.key, s.sel.rank.top);
      if (lane < p.topk_group) kept[s.sel.rank.top[lane]] = true;
      __syncwarp();
    } else {
      for (int j = 0; j < p.topk_group; ++j) {
        const int g = warp_arg_max_untaken(group, G, kept);  // kept doubles as "taken" here
        if (lane == 0) kept[g] = true;
        __syncwarp();
      }
    }
    for (int e = lane; e < E; e += 32)
      if (!kept[e / per]) choice[e] = 0.f;
    __syncwarp();
  }
  int idx[ops::kMoeMaxTopK];
  if (E <= rank_max) {
    warp_top_k_rank(choice, E, K, s.sel.rank.key, s.sel.rank.top);
    for (int j = 0; j < K; ++j) idx[j] = s.sel.rank.top[j];
  } else {
    bool* taken = s.sel.taken;
    for (int e = lane; e < E; e += 32) taken[e] = false;
    __syncwarp();
    for (int j = 0; j < K; ++j) {
      idx[j] = warp_arg_max_untaken(choice, E, taken);
      if (lane == 0) taken[idx[j]] = true;
      __syncwarp();
    }
  }
  if (p.dense_weight)
    for (int e = lane; e < E; e += 32) p.dense_weight[t * E + e] = 0.f;
  __syncwarp();
  if (lane != 0) return;
  float w[ops::kMoeMaxTopK], sum = 0.f;
  for (int j = 0; j < K; ++j) sum += w[j] = p.method == ops::MoeTopk::kNoauxTc ? score[idx[j]] : choice[idx[j]];
  for (int j = 0; j < K; ++j) {
    if (p.norm_topk_prob) w[j] /= sum + 1e-20f;
    const float wf = w[j] * p.routed_scaling_factor;
    p.topk_idx[t * K + j] = idx[j];
    p.topk_weight[t * K + j] = wf;
    if (p.dense_weight) p.dense_weight[t * E + idx[j]] = wf;
  }
}

// The routing scratch of a block's warps.
struct RouteScratch {
  WarpRouteScratch warp[kRouteWarps];
};

// One warp per token. late (route_late(), FRUGAL_ROUTE_LATE_TRIGGER): the next kernel is let
// launch only once the routing is written, not at this kernel's wait.
__global__ void __launch_bounds__(kRouteWarps * 32) moe_route_kernel(ops::MoeRouteParams p, int rank_max, int late) {
  pdl_wait_only();
  if (!late) pdl_trigger();
  __shared__ RouteScratch rs;
  const int warp = threadIdx.x >> 5;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= p.n_tokens) return;
  route_token(p, t, p.logits + t * p.ld_logits, rs.warp[warp], rank_max);
  if (late) pdl_trigger();
}

// moe_router in one launch: a cluster of kRouterCtas CTAs (sm_90) computes the router's logits,
// warp gw of the cluster owning rows gw, gw + 32, ... with the GEMV's arithmetic (gemv.cu at m <=
// 8 on a shape it does not split: each lane sums the 8-wide dot products of its chunks lane,
// lane + 32, ... in order, then the warp's butterfly), so the logits equal the matmul's bit for
// bit. Each logit goes to y and into CTA 0's shared memory; after the cluster barrier CTA 0's
// warps route the tokens from there with moe_route_kernel's code. The first kRouterPreRows rows
// of every warp load their first kRouterU chunks a lane before the PDL wait (weights: no kernel
// writes them). kNorm: the norm before the router runs here too, every CTA normalizing the
// tokens' rows into its shared memory (norm_prologue.cuh: rms_norm's bits; CTA 0 writes norm.y,
// which the experts read next); that memory is CTA 0's routing scratch after the barrier.
constexpr int kRouterCtas = 8;
constexpr int kRouterWarps = kRouteWarps;
constexpr int kRouterMaxTokens = static_cast<int>(kGemvMaxM);
constexpr int kRouterU = 8;
constexpr int kRouterPreRows = 2;
static_assert(sizeof(RouteScratch) >= kNormMaxVec * sizeof(uint4), "the normalized rows fit the routing scratch");

// Router row e's first kRouterU 16-byte chunks a lane (zeros past the row or for e >= E):
// weights, which no kernel writes, so they may be requested before the PDL wait.
__device__ __forceinline__ void router_load_first(const ops::MatmulParams& mm, int E, int e, uint4 (&v)[kRouterU]) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = mm.k / 8;
  const __nv_bfloat16* wr = static_cast<const __nv_bfloat16*>(mm.w.data) + static_cast<int64_t>(e < E ? e : 0) * mm.k;
#pragma unroll
  for (int u = 0; u < kRouterU; ++u) {
    const int64_t c = lane + 32 * u;
    v[u] = e < E && c < chunks ? load_stream16(wr + c * 8) : make_uint4(0, 0, 0, 0);
  }
}

// Router row e over the M tokens with the GEMV's arithmetic (gemv.cu at m <= 8 on a shape it
// does not split: each lane sums the 8-wide dot products of its chunks lane, lane + 32, ... in
// order, then the warp's butterfly), so the logits equal the matmul's bit for bit. `first` holds
// the row's first chunks (router_load_first); x_chunk(m, c) gives token m's chunk c of x; lane m
// gets token m's logit and calls put(m, value).
template <class XChunk, class Put>
__device__ __forceinline__ void router_row(const ops::MatmulParams& mm, int M, int e, const uint4 (&first)[kRouterU],
                                           XChunk x_chunk, Put put) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = mm.k / 8;
  const __nv_bfloat16* wr = static_cast<const __nv_bfloat16*>(mm.w.data) + static_cast<int64_t>(e) * mm.k;
  float acc[kRouterMaxTokens] = {};
  for (int64_t base = lane; base < chunks; base += 32 * kRouterU) {
    uint4 wv[kRouterU];
#pragma unroll
    for (int u = 0; u < kRouterU; ++u) {
      const int64_t c = base + 32 * u;
      wv[u] = base == lane ? first[u] : c < chunks ? load_stream16(wr + c * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kRouterU; ++u) {
      const int64_t c = base + 32 * u;
      if (c >= chunks) break;
#pragma unroll
      for (int m = 0; m < kRouterMaxTokens; ++m)
        if (m < M) acc[m] += moe::dot_bf16x8(wv[u], x_chunk(m, c));  // gemv.cu's dot8: w * x in element order
    }
  }
#pragma unroll
  for (int m = 0; m < kRouterMaxTokens; ++m) {
    if (m >= M) break;
    const float tot = warp_sum(acc[m]);
    if (lane == m) put(m, tot);
  }
}

template <bool kNorm>
__global__ void __launch_bounds__(kRouterWarps * 32) moe_router_kernel(ops::MoeRouterParams p, int rank_max, int late) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ float logits_s[kRouterMaxTokens * ops::kMoeMaxExperts];  // CTA 0's: the cluster's logits
  __shared__ __align__(16) unsigned char scratch[sizeof(RouteScratch)];  // the normalized rows, then the routing
  __shared__ float red[32];
  auto& rs = *reinterpret_cast<RouteScratch*>(scratch);
  auto* xs = reinterpret_cast<uint4*>(scratch);
  const ops::MatmulParams& mm = p.mm;
  const int warp = threadIdx.x >> 5;
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  constexpr int kAll = kRouterCtas * kRouterWarps;
  const int gw = static_cast<int>(rank) * kRouterWarps + warp;
  const int E = p.route.n_experts, M = static_cast<int>(mm.m);
  const int64_t chunks = mm.k / 8;
  const auto* x = static_cast<const __nv_bfloat16*>(mm.x);
  uint4 pre[kRouterPreRows][kRouterU];
#pragma unroll
  for (int i = 0; i < kRouterPreRows; ++i) router_load_first(mm, E, gw + kAll * i, pre[i]);
  // CTA 0's shared memory may be written only once every CTA of the cluster runs (the CUDA
  // guide's rule for distributed shared memory): arrive now, wait before the first remote store.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  pdl_wait_only();  // the trigger only once the logits are made (below)
  if constexpr (kNorm) {
    const ops::RmsNormParams& n = p.norm;
    for (int m = 0; m < M; ++m)
      norm_prologue<kRouterWarps * 32>(
          RowNorm{.x = static_cast<const __nv_bfloat16*>(n.x) + m * n.ld_x, .y = static_cast<__nv_bfloat16*>(n.y) + m * n.ld_y,
                  .w = static_cast<const __nv_bfloat16*>(n.weight), .dim = static_cast<int>(n.dim), .eps = n.eps},
          xs + m * chunks, red, rank == 0);
  }
  // Token m's chunk c of x: the normalized row in shared memory, or mm.x.
  auto x_chunk = [&](int m, int64_t c) {
    if constexpr (kNorm) return xs[m * chunks + c];
    else return __ldg(reinterpret_cast<const uint4*>(x + m * mm.ld_x + c * 8));
  };
  uint32_t logits0;  // logits_s in CTA 0, as a shared::cluster address
  asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(logits0) : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(logits_s))));
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // every CTA of the cluster has started
  auto row = [&](int e, const uint4 (&first)[kRouterU]) {
    router_row(mm, M, e, first, x_chunk, [&](int m, float tot) {
      static_cast<float*>(mm.y)[m * mm.ld_y + e] = tot;
      asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(logits0 + 4u * static_cast<uint32_t>(m * E + e)), "f"(tot) : "memory");
    });
  };
#pragma unroll
  for (int i = 0; i < kRouterPreRows; ++i)
    if (gw + kAll * i < E) row(gw + kAll * i, pre[i]);
  for (int e = gw + kAll * kRouterPreRows; e < E; e += kAll) {
    uint4 first[kRouterU];
    router_load_first(mm, E, e, first);
    row(e, first);
  }
  // Every CTA's logits are in CTA 0 (and CTA 0's warps are done with the normalized rows).
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (!late) pdl_trigger();  // the router rows are read: the MoE kernel's early loads may start now, under the routing
  if (rank != 0) return;
  for (int t = warp; t < M; t += kRouterWarps) {
    route_token(p.route, t, logits_s + t * E, rs.warp[warp], rank_max);
    __syncwarp();  // lane 0's reads of this token's arrays before the next token's writes
  }
  if (late) pdl_trigger();  // the other CTAs have exited
#else
  __trap();  // launched only on sm_90+ (launch_moe_router)
#endif
}

// moe_router's matmul and routing in one launch without a cluster (the norm runs first, as its
// own kernel): ceil(E / kRouterWarps) blocks, warp gw of the grid owning rows gw, gw + all, ...
// (each row's first chunks requested before the PDL wait), with router_row's arithmetic (the
// GEMV's bits) into y. Then the last block to finish routes: every thread fences its stores,
// thread 0 takes a ticket from `counter` (a zeroed word of the backend's), and the block that
// takes the last one reads the logits back through L2 into shared memory, resets the counter for
// the next launch, and routes every token with moe_route_kernel's code. No work is repeated: the
// rows are spread over the grid as the GEMV spreads them, and only the routing waits for all.
// Both fused routers let the next kernel launch (the PDL trigger) only once their router rows
// are read, not at their wait as every other kernel does: with the trigger at the wait, the MoE
// gate_up kernel's thousands of blocks start their early loads (the shared experts' rows) while
// the router still reads its 256 KB, which then queue behind them (a reading of why both lost,
// H100 2026-12-07: V2-Lite batch 1 -11.8% / -6.1%; in the three-op sequence the route kernel's
// wait comes after the router GEMV, so its rows never meet those loads). Measured no better
// (H100 2026-12-08: -11.7% / -6.2%; mode 3's trace: the grid kernel adds 13.8 us).
__global__ void __launch_bounds__(kRouterWarps * 32) moe_router_grid_kernel(ops::MoeRouterParams p, uint32_t* counter,
                                                                          int rank_max, int late) {
  __shared__ float logits_s[kRouterMaxTokens * ops::kMoeMaxExperts];
  __shared__ RouteScratch rs;
  __shared__ bool last;
  const ops::MatmulParams& mm = p.mm;
  const int warp = threadIdx.x >> 5;
  const int all = static_cast<int>(gridDim.x) * kRouterWarps, gw = static_cast<int>(blockIdx.x) * kRouterWarps + warp;
  const int E = p.route.n_experts, M = static_cast<int>(mm.m);
  const auto* x = static_cast<const __nv_bfloat16*>(mm.x);
  auto* y = static_cast<float*>(mm.y);
  uint4 pre[kRouterU];
  router_load_first(mm, E, gw, pre);
  pdl_wait_only();  // the trigger only once this block's rows are read (below)
  auto x_chunk = [&](int m, int64_t c) { return __ldg(reinterpret_cast<const uint4*>(x + m * mm.ld_x + c * 8)); };
  for (int e = gw; e < E; e += all) {
    if (e != gw) router_load_first(mm, E, e, pre);
    router_row(mm, M, e, pre, x_chunk, [&](int m, float tot) { y[m * mm.ld_y + e] = tot; });
  }
  if (!late) pdl_trigger();  // the MoE kernel's early loads may start now, under the last block's routing
  __threadfence();  // this thread's logits, device-wide, before the block's ticket
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = threadIdx.x; i < M * E; i += blockDim.x) logits_s[i] = __ldcg(y + (i / E) * mm.ld_y + i % E);
  if (threadIdx.x == 0) *counter = 0u;
  __syncthreads();
  for (int t = warp; t < M; t += kRouterWarps) {
    route_token(p.route, t, logits_s + t * E, rs.warp[warp], rank_max);
    __syncwarp();
  }
  if (late) pdl_trigger();  // the other blocks have exited
}

__global__ void scale_rows_kernel(ops::ScaleRowsParams p) {
  pdl_wait();
  const int64_t total = p.rows * p.dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / p.dim, j = i % p.dim;
    store_f(p.act_dtype, p.x, t * p.ld_x + j, load_f(p.act_dtype, p.x, t * p.ld_x + j) * p.scale[t * p.ld_scale]);
  }
}

int g_route_rank = -1;  // set_moe_route_rank's choice; -1: FRUGAL_MOE_ROUTE_RANK's
int rank_max() { return moe_route_rank() ? kRankMax : 0; }

// FRUGAL_ROUTE_LATE_TRIGGER=1 (an A/B knob, off): the route kernel and both fused routers let the
// next kernel (the MoE gate_up, whose thousands of blocks request the shared experts' rows before
// their own wait) launch only once the routing is written. A reading of the fused routers' trace
// (H100 2026-12-08, mode 3: the router adds 13.8 us against 3.2 + 4.5 for the GEMV and the route
// kernel): every global access made after the trigger (x, the logits' round trip, the outputs)
// waits behind those ~23 MB of early loads. Where the trigger sits changes only timing.
int route_late() {
  static const int env = env_flag("FRUGAL_ROUTE_LATE_TRIGGER");
  return env;
}

}  // namespace

bool moe_route_rank() {
  static const int env = [] {
    const char* e = std::getenv("FRUGAL_MOE_ROUTE_RANK");
    return e != nullptr && e[0] == '0' ? 0 : 1;
  }();
  return (g_route_rank >= 0 ? g_route_rank : env) != 0;
}
void set_moe_route_rank(int on) { g_route_rank = on; }

cudaError_t launch_moe_route(const ops::MoeRouteParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  return launch_kernel(moe_route_kernel, static_cast<unsigned>((p.n_tokens + kRouteWarps - 1) / kRouteWarps),
                       kRouteWarps * 32, 0, stream, p, rank_max(), route_late());
}

bool moe_router_fusable(const ops::MoeRouterParams& p) {
  const ops::MatmulParams& mm = p.mm;
  const ops::MoeRouteParams& r = p.route;
  return gemv_supported(mm) && mm.m <= kRouterMaxTokens && mm.m == r.n_tokens && mm.n == r.n_experts &&
         r.n_experts <= ops::kMoeMaxExperts && mm.y == r.logits && mm.ld_y == r.ld_logits && mm.y_dtype == DType::kF32 &&
         mm.bias == nullptr && !mm.accumulate && gemv_split_k(mm.n, mm.k) == 1;
}

bool moe_router_norm_fusable(const ops::MoeRouterParams& p) {
  const ops::RmsNormParams& n = p.norm;
  const ops::MatmulParams& mm = p.mm;
  const auto* xb = static_cast<const uint8_t*>(n.x);
  const auto* yb = static_cast<const uint8_t*>(n.y);
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  // The rows' last bytes: the two ranges [x, x + rows * ld_x) and [y, ...) must not meet.
  const int64_t xspan = ((n.rows - 1) * n.ld_x + n.dim) * 2, yspan = ((n.rows - 1) * n.ld_y + n.dim) * 2;
  return moe_router_fusable(p) && n.rows == mm.m && n.act_dtype == DType::kBF16 && n.weight_dtype == DType::kBF16 &&
         n.residual == nullptr && n.dim == mm.k && n.dim % 8 == 0 && n.rows * n.dim <= 8 * kNormMaxVec && mm.x == n.y &&
         mm.ld_x == n.ld_y && n.ld_x % 8 == 0 && n.ld_y % 8 == 0 && a16(n.x) && a16(n.y) && a16(n.weight) &&
         (xb + xspan <= yb || yb + yspan <= xb);
}

cudaError_t launch_moe_router(const ops::MoeRouterParams& p, bool with_norm, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(kRouterCtas);
  cfg.blockDim = dim3(kRouterWarps * 32);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kRouterCtas;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 2 : 1;
  const int rm = rank_max();
  const int late = route_late();
  return with_norm ? cudaLaunchKernelEx(&cfg, moe_router_kernel<true>, p, rm, late)
                   : cudaLaunchKernelEx(&cfg, moe_router_kernel<false>, p, rm, late);
}

cudaError_t launch_moe_router_grid(const ops::MoeRouterParams& p, uint32_t* counter, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((p.route.n_experts + kRouterWarps - 1) / kRouterWarps);
  return launch_kernel(moe_router_grid_kernel, blocks, kRouterWarps * 32, 0, stream, p, counter, rank_max(), route_late());
}

cudaError_t launch_scale_rows(const ops::ScaleRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.dim == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (p.rows * p.dim + kThreads - 1) / kThreads;
  return launch_kernel(scale_rows_kernel, static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream, p);
}

}  // namespace frugal::cuda
