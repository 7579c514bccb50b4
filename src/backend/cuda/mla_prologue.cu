// MLA's latent-row prologue in one kernel (the fused op mla_kv_prologue, ops/params.h): the
// RMSNorm of the latent c, the RoPE of k_pe and of every q head's q_pe, and the write of the row
// [c | k_pe] into the latent cache. Decode ran them as three launches a layer (2.6 + 2.9 + 3.1 us
// under Nsight Compute for V2-Lite's one token, each mostly launch and memory latency for ~3 KB).
// One block per token (256 threads):
//   - before the PDL wait, the token's cos / sin table and the norm weight (step inputs and
//     weights: no kernel writes them, as rope_kv_write.cu and rms_norm_bf16_kernel load them);
//   - thread i < dim / 8 holds c's 8-wide vector i; the RoPE items (a bf16 pair, or a rotate_half
//     pair of pairs) of the q heads and the k row go round the block; the k row's rotated values
//     go to the cache from registers;
//   - the block's sum of squares, then c normalized, written back and to the cache.
// bf16 activations and norm weight, one kv head of norm.dim + rotary_dim values (V2 / V3: 512 +
// 64), rotary_dim % 4 == 0, norm.dim <= 2048, caches bf16 / f16 / f32 / fp8 e4m3 (int8 latent
// caches do not exist: model/kv_storage.cpp refuses them).
//
// The results equal rms_norm then rope then kv_write bit for bit: c's sum of squares has
// rms_norm_bf16_kernel's partition and order (thread i: its 8 values in order; block_sum, whose
// extra warps here add exact zeros), the same rsqrtf and x * inv * w; the rotations are
// rope_kernel's / rope_bf16_kernel's (sincosf of the f32 angle times attention_factor,
// rope_rotate, round to bf16); the cache gets the rounded values as kv_write reads them back.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float2 v) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v.x, v.y);
}
__device__ __forceinline__ float2 round2(float2 v) { return __bfloat1622float2(__floats2bfloat162_rn(v.x, v.y)); }
__device__ __forceinline__ void unpack8(const uint4& u, float f[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 x = __bfloat1622float2(h[e]);
    f[2 * e] = x.x;
    f[2 * e + 1] = x.y;
  }
}

// Elements i, i + 1 of the token's cache row, to k_cache and (a separate buffer) v_cache.
__device__ __forceinline__ void write_pair(const ops::KvCacheLayer& c, int64_t i, float2 v) {
  store_cache2(c.cache_dtype, c.k_cache, i, v, c.k_scale);
  if (c.v_cache != c.k_cache) store_cache2(c.cache_dtype, c.v_cache, i, v, c.v_scale);
}

__global__ void __launch_bounds__(kThreads) mla_kv_prologue_kernel(ops::MlaKvPrologueParams p) {
  extern __shared__ float sc[];  // [half] cos, [half] sin
  __shared__ float red[32];
  const ops::RmsNormParams& n = p.norm;
  const ops::RopeParams& r = p.rope;
  const ops::KvCacheLayer& c = p.kv.cache;
  const int64_t tok = blockIdx.x;
  const int tid = threadIdx.x, half = r.rotary_dim / 2, nvec = static_cast<int>(n.dim / 8);
  const float pos = static_cast<float>(r.positions[tok]);
  for (int i = tid; i < half; i += kThreads) {
    float s, co;
    sincosf(pos * r.inv_freq[i], &s, &co);  // fp32 angle, as HF computes it (and the rope kernels)
    sc[i] = co * r.attention_factor;
    sc[half + i] = s * r.attention_factor;
  }
  const uint4 wraw = tid < nvec ? *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(n.weight) + tid * 8)
                                : make_uint4(0, 0, 0, 0);
  pdl_wait();
  __syncthreads();  // the table
  auto* row = static_cast<__nv_bfloat16*>(n.y) + tok * n.ld_y;  // [c | k_pe]
  const int32_t slot = p.kv.slot_mapping[tok];
  const bool write = slot >= 0 && slot < static_cast<int64_t>(c.n_blocks) * c.block_size;
  const int64_t dst = static_cast<int64_t>(slot) * c.head_dim;  // one kv head
  float v[8] = {};
  float ss = 0.f;
  if (tid < nvec) {
    unpack8(*reinterpret_cast<const uint4*>(row + tid * 8), v);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += v[e] * v[e];
  }
  // RoPE items: n_head q heads, then the k row (head n_head). Interleaved: the pair (2j, 2j + 1);
  // rotate_half: pairs (2j, 2j + half) and (2j + 1, 2j + 1 + half).
  const int per = r.interleaved ? half : half / 2;
  for (int it = tid; it < (r.n_head + 1) * per; it += kThreads) {
    const int h = it / per, j = it - h * per;
    const bool is_k = h == r.n_head;
    auto* base = is_k ? static_cast<__nv_bfloat16*>(r.k) + tok * r.ld_k
                      : static_cast<__nv_bfloat16*>(r.q) + tok * r.ld_q + static_cast<int64_t>(h) * r.head_dim;
    if (r.interleaved) {
      const float2 x = load2(base + 2 * j);
      const float2 y = round2(rope_rotate(x.x, x.y, sc[j], sc[half + j]));
      store2(base + 2 * j, y);
      if (is_k && write) write_pair(c, dst + n.dim + 2 * j, y);
    } else {
      const int e = 2 * j;
      const float2 lo = load2(base + e), hi = load2(base + e + half);
      const float2 a = rope_rotate(lo.x, hi.x, sc[e], sc[half + e]);
      const float2 b = rope_rotate(lo.y, hi.y, sc[e + 1], sc[half + e + 1]);
      const float2 nlo = round2(make_float2(a.x, b.x)), nhi = round2(make_float2(a.y, b.y));
      store2(base + e, nlo);
      store2(base + e + half, nhi);
      if (is_k && write) {
        write_pair(c, dst + n.dim + e, nlo);
        write_pair(c, dst + n.dim + e + half, nhi);
      }
    }
  }
  ss = block_sum(ss, red);
  if (tid >= nvec) return;
  const float inv = rsqrtf(ss / static_cast<float>(n.dim) + n.eps);
  float wf[8];
  unpack8(wraw, wf);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 o = round2(make_float2(v[2 * q] * inv * wf[2 * q], v[2 * q + 1] * inv * wf[2 * q + 1]));
    store2(row + tid * 8 + 2 * q, o);
    if (write) write_pair(c, dst + tid * 8 + 2 * q, o);
  }
}

bool aligned(const void* ptr, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0; }

}  // namespace

bool mla_kv_prologue_fusable(const ops::MlaKvPrologueParams& p) {
  const ops::RmsNormParams& n = p.norm;
  const ops::RopeParams& r = p.rope;
  const ops::KvWriteParams& w = p.kv;
  const ops::KvCacheLayer& c = w.cache;
  const DType ct = c.cache_dtype;
  const bool cache_ok = ct == DType::kBF16 || ct == DType::kF16 || ct == DType::kF32 ||
                        (ct == DType::kF8E4M3 && (c.k_cache != c.v_cache || c.k_scale == c.v_scale));
  const auto* row = static_cast<const __nv_bfloat16*>(n.y);
  const bool norm_ok = n.act_dtype == DType::kBF16 && n.weight_dtype == DType::kBF16 && n.residual == nullptr &&
                       n.x == n.y && n.y != nullptr && n.dim > 0 && n.dim % 8 == 0 && n.dim / 8 <= kThreads &&
                       n.ld_x == n.ld_y && n.ld_y % 8 == 0 && aligned(n.y, 16) && aligned(n.weight, 16) &&
                       n.rows <= 0x7fffffff;
  const bool rope_ok = r.act_dtype == DType::kBF16 && r.q != nullptr && r.k == row + n.dim && r.ld_k == n.ld_y &&
                       r.n_head_kv == 1 && r.n_head >= 0 && r.n_tokens == n.rows && r.rotary_dim > 0 &&
                       r.rotary_dim % 4 == 0 && r.rotary_dim <= r.head_dim && r.head_dim % 2 == 0 && r.ld_q % 2 == 0 &&
                       aligned(r.q, 4);
  const bool kv_ok = w.act_dtype == DType::kBF16 && w.k == n.y && w.v == n.y && w.ld_k == n.ld_y && w.ld_v == n.ld_y &&
                     w.n_tokens == n.rows && c.n_head_kv == 1 && c.head_dim == n.dim + r.rotary_dim && cache_ok &&
                     aligned(c.k_cache, 4) && aligned(c.v_cache, 4);
  return norm_ok && rope_ok && kv_ok;
}

cudaError_t launch_mla_kv_prologue(const ops::MlaKvPrologueParams& p, cudaStream_t stream) {
  if (p.norm.rows == 0) return cudaSuccess;
  return launch_kernel(mla_kv_prologue_kernel, static_cast<unsigned>(p.norm.rows), kThreads,
                       static_cast<size_t>(p.rope.rotary_dim) * sizeof(float), stream, p);
}

}  // namespace frugal::cuda
