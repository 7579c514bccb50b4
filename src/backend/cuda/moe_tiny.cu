// DeepSeekMoE experts for steps of a few (token, expert) pairs (batch-1/2 decode; moe_experts.cu
// chooses this path, MoePath::kTiny), in two kernels with no permutation and no separate combine:
//   1. gate_up: one warp per (pair, channel j) of the routed experts (the pair's expert read from
//      topk_idx on the device) and per (token, channel j) of the shared experts; the gate and up
//      rows stream with 16-byte loads, kGateUpU chunks of each in flight a lane, against the
//      token's x row (L1-cached: every warp of the token reads it);
//      h = bf16(silu(x . gate) * (x . up)) into the scratch (Layout::h [pairs, inter]; the
//      shared h [n_tokens, shared_inter] at Layout::y, unused on this path otherwise).
//   2. down + combine: one warp per (token, output column i) runs over the concatenation of the
//      down rows of the token's local pairs (k order) and then the shared down row, lanes on
//      8-wide chunks lane-strided over it (kDownU in flight), each chunk's dot product times its
//      pair's router weight (1 for the shared experts) added into the lane's sum, then a
//      butterfly: out = bf16(out + sum), one read and one rounding of out.
// A row's sum is a fixed-order reduction over its own pairs only (batch invariant within the
// path). A pair routed to another rank's expert, or with an id outside [0, n_routed), has no
// warp in 1. and no chunks in 2.: it adds nothing, and reads nothing out of bounds.
// Each pair reads its expert's rows itself: two tokens on one expert read it twice (the GEMV
// tiles would read it once), the price of no permutation; moe_experts_path bounds the pairs.
// Rows that are not 16-byte aligned (or K not a multiple of 8) take lane-strided scalar loads.
// With moe_tiny_early() (the default; FRUGAL_MOE_TINY_EARLY=0 off) both kernels ask L2 for their shared-expert rows
// before the PDL wait (cp.async.bulk.prefetch.L2, sm_90): the rows that depend on no earlier
// kernel start streaming while the route (for 1.) or gate_up (for 2.) still runs. With
// FRUGAL_MOE_TINY_EARLY=2 (moe_tiny_early_routed) 2. asks for its routed pairs' down rows too.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_layout.cuh"

namespace frugal::cuda::moe {
namespace {

constexpr int kTinyWarps = 4;  // warps a block (each its own output)
constexpr int kGateUpU = 4;    // 16-byte chunks of each of gate and up in flight a lane
constexpr int kDownU = 8;      // 16-byte chunks of down rows in flight a lane

__device__ __forceinline__ bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

__device__ __forceinline__ void pdl_wait_if(bool wait) {
  if (wait) pdl_wait();
}

// grid: ceil((pairs * inter + n_tokens * shared_inter) / kTinyWarps) blocks; shared_inter is 0
// here when the shared experts are not fused. kEarly: the shared experts' warps come first (the
// lowest blocks, resident first) and lane 0 of each asks L2 for the warp's whole gate and up rows
// before the PDL wait (weights, which no kernel writes; the routed warps need the route's topk_idx
// and wait first), so the shared experts' stream starts under the route kernel. Otherwise the
// routed warps come first.
template <bool kEarly>
__global__ void __launch_bounds__(kTinyWarps * 32) moe_tiny_gate_up_kernel(ops::MoeExpertsParams p, Layout l) {
  const int lane = threadIdx.x & 31;
  const int64_t wi = static_cast<int64_t>(blockIdx.x) * kTinyWarps + (threadIdx.x >> 5);
  const int64_t shared_warps = p.n_tokens * p.shared_inter, routed_warps = p.n_tokens * p.top_k * p.inter, K = p.hidden;
  // Warp wi's place: shared warp ws (ws >= 0) or routed warp w (w >= 0).
  const int64_t ws = kEarly ? (wi < shared_warps ? wi : -1) : (wi >= routed_warps ? wi - routed_warps : -1);
  const int64_t w = ws >= 0 ? -1 : kEarly ? wi - shared_warps : wi;
  const bf16 *wg, *wu, *x;
  bf16* dst;
  bool vec = false;
  if (ws >= 0) {
    pdl_wait_if(!kEarly);
    if (ws >= shared_warps) return;
    const int64_t t = ws / p.shared_inter, j = ws - t * p.shared_inter;
    wg = static_cast<const bf16*>(p.shared_gate.data) + j * K;
    wu = static_cast<const bf16*>(p.shared_up.data) + j * K;
    x = static_cast<const bf16*>(p.x) + t * p.ld_x;
    dst = reinterpret_cast<bf16*>(l.y) + t * p.shared_inter + j;
    vec = K % 8 == 0 && aligned16(x) && aligned16(wg) && aligned16(wu);
    if (kEarly && vec && lane == 0 && K * 2 < (int64_t{1} << 31)) {
      prefetch_l2(wg, static_cast<uint32_t>(K * 2));
      prefetch_l2(wu, static_cast<uint32_t>(K * 2));
    }
    pdl_wait_if(kEarly);
  } else {
    pdl_wait();
    if (w >= routed_warps) return;
    const int64_t pair = w / p.inter, j = w - pair * p.inter;
    const int e = local_expert(p, pair);
    if (e < 0) return;  // the whole warp: another rank's pair
    wg = static_cast<const bf16*>(p.gate[e].data) + j * K;
    wu = static_cast<const bf16*>(p.up[e].data) + j * K;
    x = static_cast<const bf16*>(p.x) + pair / p.top_k * p.ld_x;
    dst = l.h + pair * p.inter + j;
    vec = K % 8 == 0 && aligned16(x) && aligned16(wg) && aligned16(wu);
  }
  float g = 0.f, u = 0.f;
  if (vec) {
    const int64_t chunks = K / 8;
    for (int64_t base = lane; base < chunks; base += 32 * kGateUpU) {
      uint4 gv[kGateUpU], uv[kGateUpU];
#pragma unroll
      for (int q = 0; q < kGateUpU; ++q) {
        const int64_t c = base + 32 * q;
        gv[q] = c < chunks ? load_stream16(wg + c * 8) : make_uint4(0, 0, 0, 0);
        uv[q] = c < chunks ? load_stream16(wu + c * 8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int q = 0; q < kGateUpU; ++q) {
        const int64_t c = base + 32 * q;
        if (c >= chunks) break;
        const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + c * 8));
        g += dot_bf16x8(gv[q], xv);
        u += dot_bf16x8(uv[q], xv);
      }
    }
  } else {
    for (int64_t j = lane; j < K; j += 32) {
      const float xv = __bfloat162float(x[j]);
      g = fmaf(__bfloat162float(wg[j]), xv, g);
      u = fmaf(__bfloat162float(wu[j]), xv, u);
    }
  }
  g = warp_sum(g);
  u = warp_sum(u);
  if (lane == 0) *dst = __float2bfloat16(silu_mul_f(g, u));
}

// grid: ceil(n_tokens * hidden / kTinyWarps) blocks; `shared`: the shared experts are fused.
// Segment s of a warp's row: the s-th local pair of the token (k order; inter values) or, last,
// the shared experts (shared_inter values), each a (down row, h row, weight) in shared memory.
// kEarly: lane 0 asks L2 for the whole shared down row before the PDL wait (weights only; the h
// rows and the pair weights come after it). With `routed` too, lanes 1..top_k ask for their
// pairs' down rows: the expert ids are read before the wait. That is safe: the route that wrote
// topk_idx ran before gate_up, and this grid starts only once every gate_up block has passed its
// own wait (the trigger follows it in pdl_wait), so the route has completed and its writes are
// visible; the next writer of topk_idx (the next layer's route) runs after this grid.
template <bool kEarly>
__global__ void __launch_bounds__(kTinyWarps * 32) moe_tiny_down_kernel(ops::MoeExpertsParams p, Layout l, bool shared,
                                                                        bool routed) {
  constexpr int kSegs = ops::kMoeMaxTopK + 1;
  __shared__ const bf16* seg_w[kTinyWarps][kSegs];
  __shared__ const bf16* seg_h[kTinyWarps][kSegs];
  __shared__ float seg_k[kTinyWarps][kSegs];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t w = static_cast<int64_t>(blockIdx.x) * kTinyWarps + warp;
  if (w >= p.n_tokens * p.hidden) {  // the whole warp
    pdl_wait();
    return;
  }
  const int64_t t = w / p.hidden, i = w - t * p.hidden;
  if constexpr (kEarly) {
    const bf16* sw = shared ? static_cast<const bf16*>(p.shared_down.data) + i * p.shared_inter : nullptr;
    if (shared && lane == 0 && p.shared_inter % 8 == 0 && aligned16(sw) && p.shared_inter * 2 < (int64_t{1} << 31))
      prefetch_l2(sw, static_cast<uint32_t>(p.shared_inter * 2));
    if (routed && lane >= 1 && lane <= p.top_k && p.inter % 8 == 0 && p.inter * 2 < (int64_t{1} << 31)) {
      const int e = local_expert(p, t * p.top_k + lane - 1);
      const bf16* rw = e >= 0 ? static_cast<const bf16*>(p.down[e].data) + i * p.inter : nullptr;
      if (rw != nullptr && aligned16(rw)) prefetch_l2(rw, static_cast<uint32_t>(p.inter * 2));
    }
  }
  pdl_wait();
  const int e = lane < p.top_k ? local_expert(p, t * p.top_k + lane) : -1;
  const unsigned local = __ballot_sync(0xffffffffu, e >= 0);
  const int n_routed = __popc(local), n_seg = n_routed + (shared ? 1 : 0);
  bool vec = p.inter % 8 == 0;
  if (e >= 0) {
    const int s = __popc(local & ((1u << lane) - 1));
    seg_w[warp][s] = static_cast<const bf16*>(p.down[e].data) + i * p.inter;
    seg_h[warp][s] = l.h + (t * p.top_k + lane) * p.inter;
    seg_k[warp][s] = p.topk_weight[t * p.top_k + lane];
    vec = vec && aligned16(seg_w[warp][s]);
  }
  if (shared && lane == 0) {
    seg_w[warp][n_routed] = static_cast<const bf16*>(p.shared_down.data) + i * p.shared_inter;
    seg_h[warp][n_routed] = reinterpret_cast<const bf16*>(l.y) + t * p.shared_inter;
    seg_k[warp][n_routed] = 1.f;
    vec = vec && p.shared_inter % 8 == 0 && aligned16(seg_w[warp][n_routed]);
  }
  vec = __all_sync(0xffffffffu, vec);  // h rows are 16-byte aligned with their lengths (scratch regions: 256)
  __syncwarp();
  float acc = 0.f;
  if (vec) {
    // The lane's next chunk is `off` chunks into segment s; segments hold len(s) chunks.
    const int routed_len = static_cast<int>(p.inter / 8), shared_len = static_cast<int>(p.shared_inter / 8);
    auto len = [&](int s) { return s < n_routed ? routed_len : shared_len; };
    int s = 0, off = lane;
    while (s < n_seg && off >= len(s)) off -= len(s), ++s;
    while (s < n_seg) {
      uint4 wv[kDownU], hv[kDownU];
      float wk[kDownU];
#pragma unroll
      for (int q = 0; q < kDownU; ++q) {
        if (s < n_seg) {
          wv[q] = load_stream16(seg_w[warp][s] + off * 8);
          hv[q] = __ldg(reinterpret_cast<const uint4*>(seg_h[warp][s] + off * 8));
          wk[q] = seg_k[warp][s];
          off += 32;
          while (s < n_seg && off >= len(s)) off -= len(s), ++s;
        } else {
          wv[q] = hv[q] = make_uint4(0, 0, 0, 0);
          wk[q] = 0.f;
        }
      }
#pragma unroll
      for (int q = 0; q < kDownU; ++q) acc = fmaf(wk[q], dot_bf16x8(wv[q], hv[q]), acc);
    }
  } else {
    for (int s = 0; s < n_seg; ++s) {
      const bf16 *wr = seg_w[warp][s], *hr = seg_h[warp][s];
      const float wk = seg_k[warp][s];
      const int64_t n = s < n_routed ? p.inter : p.shared_inter;
      for (int64_t j = lane; j < n; j += 32) acc = fmaf(wk, __bfloat162float(wr[j]) * __bfloat162float(hr[j]), acc);
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) {
    bf16* o = static_cast<bf16*>(p.out) + t * p.ld_out + i;
    *o = __float2bfloat16(__bfloat162float(*o) + acc);
  }
}

}  // namespace

bool moe_tiny_fuses_shared(const ops::MoeExpertsParams& p) {
  if (!p.has_shared()) return false;
  for (const ops::WeightView* w : {&p.shared_gate, &p.shared_up, &p.shared_down})
    if (w->format != ops::dense_format(DType::kBF16)) return false;
  return true;
}

cudaError_t launch_tiny(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream) {
  ops::MoeExpertsParams q = p;
  if (!moe_tiny_fuses_shared(p)) q.shared_inter = 0;  // the backend adds them after (its own ops)
  const int64_t gate_up_warps = q.n_tokens * q.top_k * q.inter + q.n_tokens * q.shared_inter;
  const unsigned gate_up_blocks = static_cast<unsigned>(ceil_div(gate_up_warps, kTinyWarps));
  const unsigned down_blocks = static_cast<unsigned>(ceil_div(q.n_tokens * q.hidden, kTinyWarps));
  const bool shared = q.has_shared();
  if (moe_tiny_early()) {
    const cudaError_t err = launch_kernel(moe_tiny_gate_up_kernel<true>, gate_up_blocks, kTinyWarps * 32, 0, stream, q, l);
    if (err != cudaSuccess) return err;
    return launch_kernel(moe_tiny_down_kernel<true>, down_blocks, kTinyWarps * 32, 0, stream, q, l, shared,
                         moe_tiny_early_routed());
  }
  const cudaError_t err = launch_kernel(moe_tiny_gate_up_kernel<false>, gate_up_blocks, kTinyWarps * 32, 0, stream, q, l);
  if (err != cudaSuccess) return err;
  return launch_kernel(moe_tiny_down_kernel<false>, down_blocks, kTinyWarps * 32, 0, stream, q, l, shared, false);
}

}  // namespace frugal::cuda::moe
