// MLA's latent-row prologue for one token, by one block (the fused op mla_kv_prologue,
// ops/params.h): the RMSNorm of the latent c, the RoPE of k_pe and of q heads' q_pe, and the
// write of the row [c | k_pe] into the latent cache. Shared by mla_kv_prologue_kernel
// (mla_prologue.cu, every q head) and the persistent MLA kernel (mla_attention.cu, no q head: it
// rotates its own copies of q_pe), so both round alike:
//   - mla_prologue_table / mla_prologue_weight before the PDL wait (step inputs and weights: no
//     kernel writes them, as rope_kv_write.cu and rms_norm_bf16_kernel load them);
//   - thread i < dim / 8 holds c's 8-wide vector i; the RoPE items (a bf16 pair, or a
//     rotate_half pair of pairs) of the q heads and the k row go round the block; the k row's
//     rotated values go to the cache from registers;
//   - the block's sum of squares, then c normalized, written back and to the cache.
// The results equal rms_norm then rope then kv_write bit for bit: c's sum of squares has
// rms_norm_bf16_kernel's partition and order (thread i: its 8 values in order; block_sum, whose
// extra warps here add exact zeros), the same rsqrtf and x * inv * w; the rotations are
// rope_kernel's / rope_bf16_kernel's (sincosf of the f32 angle times attention_factor,
// rope_rotate, round to bf16); the cache gets the rounded values as kv_write reads them back.
// The row and q are read through L2 (__ldcg): the persistent kernel reads rows other blocks of
// its own grid wrote. Included only by .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kv_quant.cuh"
#include "ops/params.h"

namespace frugal::cuda {

// kGlobal: global memory through L2 (__ldcg); else any memory (the persistent kernel's copies
// of q heads in shared memory).
template <bool kGlobal = true>
__device__ __forceinline__ float2 mla_load2(const __nv_bfloat16* p) {
  const auto* q = reinterpret_cast<const __nv_bfloat162*>(p);
  return __bfloat1622float2(kGlobal ? __ldcg(q) : *q);
}
__device__ __forceinline__ void mla_store2(__nv_bfloat16* p, float2 v) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v.x, v.y);
}
__device__ __forceinline__ float2 mla_round2(float2 v) { return __bfloat1622float2(__floats2bfloat162_rn(v.x, v.y)); }
// Token tok's cos / sin (times attention_factor) into sc[0, half) / sc[half, 2 half), by the block.
__device__ __forceinline__ void mla_prologue_table(const ops::RopeParams& r, int64_t tok, float* sc) {
  const int half = r.rotary_dim / 2;
  const float pos = static_cast<float>(r.positions[tok]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, co;
    sincosf(pos * r.inv_freq[i], &s, &co);  // fp32 angle, as HF computes it (and the rope kernels)
    sc[i] = co * r.attention_factor;
    sc[half + i] = s * r.attention_factor;
  }
}

// This thread's 8-wide vector of the norm weight (zeros past dim).
__device__ __forceinline__ uint4 mla_prologue_weight(const ops::RmsNormParams& n) {
  const int tid = threadIdx.x;
  return tid < static_cast<int>(n.dim / 8) ? *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(n.weight) + tid * 8)
                                           : make_uint4(0, 0, 0, 0);
}

// One RoPE item it of a head's rope part at base (interleaved: the pair (2j, 2j + 1); rotate_half:
// the pairs (2j, 2j + half) and (2j + 1, 2j + 1 + half)), rotated and rounded to bf16 in place;
// the rounded values go to `emit(offset, pair)` too (the k row's cache write). kGlobal: as mla_load2.
template <bool kGlobal = true, typename Emit>
__device__ __forceinline__ void mla_rope_item(__nv_bfloat16* base, int j, int half, bool interleaved, const float* sc,
                                              Emit emit) {
  if (interleaved) {
    const float2 x = mla_load2<kGlobal>(base + 2 * j);
    const float2 y = mla_round2(rope_rotate(x.x, x.y, sc[j], sc[half + j]));
    mla_store2(base + 2 * j, y);
    emit(2 * j, y);
  } else {
    const int e = 2 * j;
    const float2 lo = mla_load2<kGlobal>(base + e), hi = mla_load2<kGlobal>(base + e + half);
    const float2 a = rope_rotate(lo.x, hi.x, sc[e], sc[half + e]);
    const float2 b = rope_rotate(lo.y, hi.y, sc[e + 1], sc[half + e + 1]);
    const float2 nlo = mla_round2(make_float2(a.x, b.x)), nhi = mla_round2(make_float2(a.y, b.y));
    mla_store2(base + e, nlo);
    mla_store2(base + e + half, nhi);
    emit(e, nlo);
    emit(e + half, nhi);
  }
}

// Elements i, i + 1 of the token's cache row, to k_cache and (a separate buffer) v_cache.
__device__ __forceinline__ void mla_write_pair(const ops::KvCacheLayer& c, int64_t i, float2 v) {
  store_cache2(c.cache_dtype, c.k_cache, i, v, c.k_scale);
  if (c.v_cache != c.k_cache) store_cache2(c.cache_dtype, c.v_cache, i, v, c.v_scale);
}

// Where a q head's rotated values go besides its own place (q_out nullptr: nowhere): head h's
// value e of token tok to q_out[tok * ld + h * stride + e] (MLA's [q_abs | q_pe] rows, whose q_pe
// part the absorbed weight's identity rows would copy; mla.cu's prologue + absorb launch).
struct MlaQCopy {
  __nv_bfloat16* q_out = nullptr;
  int64_t ld = 0, stride = 0;
};

// Token tok's prologue by every thread of the block (blockDim.x >= norm.dim / 8; sc from
// mla_prologue_table, after a barrier; red: 32 floats of shared memory). q heads [0, n_q_heads)
// are rotated in place (and copied to qc.q_out).
__device__ __forceinline__ void mla_prologue_token(const ops::MlaKvPrologueParams& p, int64_t tok, int n_q_heads,
                                                   uint4 wraw, const float* sc, float* red, MlaQCopy qc = {}) {
  const ops::RmsNormParams& n = p.norm;
  const ops::RopeParams& r = p.rope;
  const ops::KvCacheLayer& c = p.kv.cache;
  const int tid = threadIdx.x, half = r.rotary_dim / 2, nvec = static_cast<int>(n.dim / 8);
  auto* row = static_cast<__nv_bfloat16*>(n.y) + tok * n.ld_y;  // [c | k_pe]
  const int32_t slot = p.kv.slot_mapping[tok];
  const bool write = slot >= 0 && slot < static_cast<int64_t>(c.n_blocks) * c.block_size;
  const int64_t dst = static_cast<int64_t>(slot) * c.head_dim;  // one kv head
  float v[8] = {};
  float ss = 0.f;
  if (tid < nvec) {
    unpack_bf16x8(__ldcg(reinterpret_cast<const uint4*>(row + tid * 8)), v);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += v[e] * v[e];
  }
  // RoPE items: n_q_heads q heads, then the k row.
  const int per = r.interleaved ? half : half / 2;
  for (int it = tid; it < (n_q_heads + 1) * per; it += blockDim.x) {
    const int h = it / per, j = it - h * per;
    if (h == n_q_heads) {
      mla_rope_item(static_cast<__nv_bfloat16*>(r.k) + tok * r.ld_k, j, half, r.interleaved, sc, [&](int e, float2 y) {
        if (write) mla_write_pair(c, dst + n.dim + e, y);
      });
    } else {
      mla_rope_item(static_cast<__nv_bfloat16*>(r.q) + tok * r.ld_q + static_cast<int64_t>(h) * r.head_dim, j, half,
                    r.interleaved, sc, [&](int e, float2 y) {
                      if (qc.q_out != nullptr) mla_store2(qc.q_out + tok * qc.ld + h * qc.stride + e, y);
                    });
    }
  }
  ss = block_sum(ss, red);
  if (tid < nvec) {
    const float inv = rsqrtf(ss / static_cast<float>(n.dim) + n.eps);
    float wf[8];
    unpack_bf16x8(wraw, wf);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float2 o = mla_round2(make_float2(v[2 * q] * inv * wf[2 * q], v[2 * q + 1] * inv * wf[2 * q + 1]));
      mla_store2(row + tid * 8 + 2 * q, o);
      if (write) mla_write_pair(c, dst + tid * 8 + 2 * q, o);
    }
  }
}

// Token tok's whole prologue by the block, its PDL wait included: the table and the norm weight
// before the wait, then mla_prologue_token over every q head (sc: rotary_dim floats of shared
// memory; red: 32). mla_kv_prologue_kernel's body, and the prologue blocks of mla.cu's prologue +
// absorb launch (with qc).
__device__ __forceinline__ void mla_prologue_block(const ops::MlaKvPrologueParams& p, int64_t tok, float* sc, float* red,
                                                   MlaQCopy qc = {}) {
  mla_prologue_table(p.rope, tok, sc);
  const uint4 wraw = mla_prologue_weight(p.norm);
  pdl_wait();
  __syncthreads();  // the table
  mla_prologue_token(p, tok, p.rope.n_head, wraw, sc, red, qc);
}

}  // namespace frugal::cuda
