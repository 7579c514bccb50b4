// MLA's latent-row prologue in one kernel (the fused op mla_kv_prologue, ops/params.h): the
// RMSNorm of the latent c, the RoPE of k_pe and of every q head's q_pe, and the write of the row
// [c | k_pe] into the latent cache. Decode ran them as three launches a layer (2.6 + 2.9 + 3.1 us
// under Nsight Compute for V2-Lite's one token, each mostly launch and memory latency for ~3 KB).
// One block per token (256 threads), its body mla_prologue_token (mla_prologue.cuh, where the
// order of its work and why it equals the sequence bit for bit are told).
// bf16 activations and norm weight, one kv head of norm.dim + rotary_dim values (V2 / V3: 512 +
// 64), rotary_dim % 4 == 0, norm.dim <= 2048, caches bf16 / f16 / f32 / fp8 e4m3 (int8 latent
// caches do not exist: model/kv_storage.cpp refuses them).
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mla_prologue.cuh"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) mla_kv_prologue_kernel(ops::MlaKvPrologueParams p) {
  extern __shared__ float sc[];  // [half] cos, [half] sin
  __shared__ float red[32];
  mla_prologue_block(p, blockIdx.x, sc, red);
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
