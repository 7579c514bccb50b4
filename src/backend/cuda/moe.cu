// DeepSeek MoE routing and per-row scaling (ops::MoeRouteParams, ops::ScaleRowsParams).
// Routing is one warp per token (n_experts <= kMoeMaxExperts, top_k <= kMoeMaxTopK), in fp32,
// with the reference's selection and tie rule (lower id); the softmax sums lane-strided.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

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

// One warp per token; its scores, choices and flags live in shared memory.
__global__ void __launch_bounds__(kRouteWarps * 32) moe_route_kernel(ops::MoeRouteParams p) {
  pdl_wait();
  __shared__ float score_s[kRouteWarps][ops::kMoeMaxExperts], choice_s[kRouteWarps][ops::kMoeMaxExperts];
  __shared__ float group_s[kRouteWarps][ops::kMoeMaxExperts];
  __shared__ bool taken_s[kRouteWarps][ops::kMoeMaxExperts], kept_s[kRouteWarps][ops::kMoeMaxExperts];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= p.n_tokens) return;
  const int E = p.n_experts, K = p.top_k;
  float* score = score_s[warp];
  float* choice = choice_s[warp];
  bool* taken = taken_s[warp];
  const float* l = p.logits + t * p.ld_logits;
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
  for (int e = lane; e < E; e += 32) {
    choice[e] = score[e] + (p.bias ? load_f(p.bias_dtype, p.bias, e) : 0.f);
    taken[e] = false;
  }
  __syncwarp();
  if (p.method != ops::MoeTopk::kGreedy) {
    const int G = p.n_group, per = E / G;
    float* group = group_s[warp];
    bool* kept = kept_s[warp];
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
    for (int j = 0; j < p.topk_group; ++j) {
      const int g = warp_arg_max_untaken(group, G, kept);  // kept doubles as "taken" here
      if (lane == 0) kept[g] = true;
      __syncwarp();
    }
    for (int e = lane; e < E; e += 32)
      if (!kept[e / per]) choice[e] = 0.f;
    __syncwarp();
  }
  int idx[ops::kMoeMaxTopK];
  for (int j = 0; j < K; ++j) {
    idx[j] = warp_arg_max_untaken(choice, E, taken);
    if (lane == 0) taken[idx[j]] = true;
    __syncwarp();
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

__global__ void scale_rows_kernel(ops::ScaleRowsParams p) {
  pdl_wait();
  const int64_t total = p.rows * p.dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / p.dim, j = i % p.dim;
    store_f(p.act_dtype, p.x, t * p.ld_x + j, load_f(p.act_dtype, p.x, t * p.ld_x + j) * p.scale[t * p.ld_scale]);
  }
}

}  // namespace

cudaError_t launch_moe_route(const ops::MoeRouteParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  return launch_kernel(moe_route_kernel, static_cast<unsigned>((p.n_tokens + kRouteWarps - 1) / kRouteWarps),
                       kRouteWarps * 32, 0, stream, p);
}

cudaError_t launch_scale_rows(const ops::ScaleRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.dim == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (p.rows * p.dim + kThreads - 1) / kThreads;
  return launch_kernel(scale_rows_kernel, static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream, p);
}

}  // namespace frugal::cuda
