// DeepSeek MoE routing and per-row scaling (ops::MoeRouteParams, ops::ScaleRowsParams).
// Correctness first: routing is one thread per token walking its expert row (n_experts <=
// kMoeMaxExperts, top_k <= kMoeMaxTopK), in fp32, with the reference's tie rule (lower id).
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

namespace frugal::cuda {
namespace {

// Index of the largest v[i] (i < n) not yet taken, lower index on ties.
__device__ int arg_max_untaken(const float* v, int n, const bool* taken) {
  int best = -1;
  for (int e = 0; e < n; ++e)
    if (!taken[e] && (best < 0 || v[e] > v[best])) best = e;
  return best;
}

__global__ void moe_route_kernel(ops::MoeRouteParams p) {
  pdl_wait();
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= p.n_tokens) return;
  const int E = p.n_experts, K = p.top_k;
  float score[ops::kMoeMaxExperts], choice[ops::kMoeMaxExperts];
  bool taken[ops::kMoeMaxExperts];
  const float* l = p.logits + t * p.ld_logits;
  if (p.scoring == ops::MoeScoring::kSoftmax) {
    float mx = l[0], sum = 0.f;
    for (int e = 1; e < E; ++e) mx = fmaxf(mx, l[e]);
    for (int e = 0; e < E; ++e) sum += score[e] = expf(l[e] - mx);
    for (int e = 0; e < E; ++e) score[e] /= sum;
  } else {
    for (int e = 0; e < E; ++e) score[e] = 1.f / (1.f + expf(-l[e]));
  }
  for (int e = 0; e < E; ++e) choice[e] = score[e] + (p.bias ? load_f(p.bias_dtype, p.bias, e) : 0.f);
  if (p.method != ops::MoeTopk::kGreedy) {
    const int G = p.n_group, per = E / G;
    float group[ops::kMoeMaxExperts];
    for (int g = 0; g < G; ++g) {
      const float* c = choice + g * per;
      float a = -INFINITY, b = -INFINITY;  // the largest and second largest of the group
      for (int e = 0; e < per; ++e) {
        if (c[e] > a) { b = a; a = c[e]; } else if (c[e] > b) { b = c[e]; }
      }
      group[g] = p.method == ops::MoeTopk::kGroupLimitedGreedy ? a : a + (per > 1 ? b : 0.f);
      taken[g] = false;
    }
    bool kept[ops::kMoeMaxExperts];
    for (int g = 0; g < G; ++g) kept[g] = false;
    for (int j = 0; j < p.topk_group; ++j) {
      const int g = arg_max_untaken(group, G, taken);
      taken[g] = kept[g] = true;
    }
    for (int e = 0; e < E; ++e)
      if (!kept[e / per]) choice[e] = 0.f;
  }
  for (int e = 0; e < E; ++e) taken[e] = false;
  int idx[ops::kMoeMaxTopK];
  float w[ops::kMoeMaxTopK], sum = 0.f;
  for (int j = 0; j < K; ++j) {
    idx[j] = arg_max_untaken(choice, E, taken);
    taken[idx[j]] = true;
    sum += w[j] = p.method == ops::MoeTopk::kNoauxTc ? score[idx[j]] : choice[idx[j]];
  }
  if (p.dense_weight)
    for (int e = 0; e < E; ++e) p.dense_weight[t * E + e] = 0.f;
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
  constexpr int kThreads = 64;
  return launch_kernel(moe_route_kernel, static_cast<unsigned>((p.n_tokens + kThreads - 1) / kThreads), kThreads, 0,
                       stream, p);
}

cudaError_t launch_scale_rows(const ops::ScaleRowsParams& p, cudaStream_t stream) {
  if (p.rows == 0 || p.dim == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (p.rows * p.dim + kThreads - 1) / kThreads;
  return launch_kernel(scale_rows_kernel, static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream, p);
}

}  // namespace frugal::cuda
