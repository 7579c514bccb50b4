// RoPE and the KV-cache write in one kernel (the fused op rope_kv_write, ops/params.h). Decode
// ran them as two launches per layer, each a few microseconds of launch and memory latency for a
// few KB; here one warp takes one head row of one token at a time: a q head (rotated in place), a k head
// (rotated in place and written to its cache slot) or a v head (written to its slot). A lane
// keeps its elements of the row in registers, so an int8 row's scale (its max |x|) needs no
// second read. grid (n_tokens, ceil(rows / 8)) for decode-sized steps (every row its own warp);
// from kOneBlockTokens tokens (prefill) grid (n_tokens, 1): the block's 8 warps take the token's
// rows in turn, so its cos / sin table (built first, in shared memory) is computed once a token,
// not once per 8 rows (a 7B 8192-token step ran 40,960 blocks, ~4x the kernel's bytes at the
// copy ceiling).
//
// bf16 activations, rotate_half pairs with rotary_dim % 4 == 0, head_dim <= 256, every KV cache
// dtype kv_write takes. The results equal rope_bf16_kernel then kv_write bit for bit: the same
// sincosf and rotation expression (rope_rotate), and k is rounded to bf16 before the cache's own
// rounding or quantization (kv_quant.cuh), as the two ops do through the k buffer.
#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"
#include "backend/cuda/split_epilogue.cuh"

namespace frugal::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int64_t kOneBlockTokens = 512;  // ~4 blocks an SM of the H200's 132 already
constexpr int kMaxHeadDim = 256;
constexpr int kRotSlots = kMaxHeadDim / 128;  // rotated (lo, hi) pair couples per lane
constexpr int kTailSlots = kMaxHeadDim / 64;  // unrotated pairs per lane

__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void store2(__nv_bfloat16* p, float2 v) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v.x, v.y);
}
__device__ __forceinline__ float2 round2(float2 v) {
  return __bfloat1622float2(__floats2bfloat162_rn(v.x, v.y));
}
__device__ __forceinline__ float abs_max(float m, float2 v) { return fmaxf(m, fmaxf(fabsf(v.x), fabsf(v.y))); }

// Row `row` of token `tok`: q heads, then k heads, then v heads (store_cache2: kv_quant.cuh).
// kSplit (split_rope_kv_write, matmul_rope_kv_write's epilogue): the rows are the qkv matmul's
// outputs made from its k-slice partials (split_y2: q, k, v at columns [0, q_dim), [q_dim,
// q_dim + kv_dim), then v), and only q's rotated rows go back to y (k and v there are scratch).
template <bool kSplit>
__device__ __forceinline__ void rope_kv_row(const ops::RopeKvWriteParams& p, const SplitArg<kSplit>& sy, int64_t tok,
                                            int row, int lane, const float* sc) {
  const ops::RopeParams& r = p.rope;
  const ops::KvCacheLayer& c = p.kv.cache;
  const int rot = r.rotary_dim, half = rot / 2, hd = r.head_dim;
  const bool is_q = row < r.n_head, is_v = row >= r.n_head + r.n_head_kv;
  const int h = is_q ? row : is_v ? row - r.n_head - r.n_head_kv : row - r.n_head;
  const int64_t off = tok * (is_q ? r.ld_q : is_v ? p.kv.ld_v : r.ld_k) + static_cast<int64_t>(h) * hd;
  const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(is_q ? r.q : is_v ? p.kv.v : r.k) + off;
  __nv_bfloat16* rotated = static_cast<__nv_bfloat16*>(is_q ? r.q : r.k) + off;  // q and k rows only
  // The row in three parts: lo pairs (2u, 2u + 1) for u < rot / 4, their rotate_half partners
  // hi (2u + half, ...), and the unrotated tail [rot, hd). A v row is partitioned alike.
  const int n_rot = rot / 4, n_tail = (hd - rot) / 2;
  const int64_t q_dim = static_cast<int64_t>(r.n_head) * hd, kv_dim = static_cast<int64_t>(r.n_head_kv) * hd;
  const int64_t col0 = (is_q ? 0 : is_v ? q_dim + kv_dim : q_dim) + static_cast<int64_t>(h) * hd;
  auto ld2 = [&](int x) {
    if constexpr (kSplit) return split_y2(sy, tok, col0 + x);
    else return load2(src + x);
  };
  float2 lo[kRotSlots] = {}, hi[kRotSlots] = {}, tail[kTailSlots] = {};
#pragma unroll
  for (int i = 0; i < kRotSlots; ++i) {
    const int u = lane + 32 * i;
    if (u < n_rot) {
      lo[i] = ld2(2 * u);
      hi[i] = ld2(2 * u + half);
    }
  }
#pragma unroll
  for (int i = 0; i < kTailSlots; ++i) {
    const int u = lane + 32 * i;
    if (u < n_tail) tail[i] = ld2(rot + 2 * u);
  }
  float amax = 0.f;
  if (!is_v) {
#pragma unroll
    for (int i = 0; i < kRotSlots; ++i) {
      const int u = lane + 32 * i, e = 2 * u;
      if (u >= n_rot) continue;
      const float2 a = rope_rotate(lo[i].x, hi[i].x, sc[e], sc[half + e]);
      const float2 b = rope_rotate(lo[i].y, hi[i].y, sc[e + 1], sc[half + e + 1]);
      lo[i] = round2(make_float2(a.x, b.x));
      hi[i] = round2(make_float2(a.y, b.y));
      if (kSplit && !is_q) continue;  // k's rows in y are scratch
      store2(rotated + e, lo[i]);
      store2(rotated + e + half, hi[i]);
    }
  }
  if (is_q) return;
  const int32_t slot = p.kv.slot_mapping[tok];
  if (slot < 0 || slot >= static_cast<int64_t>(c.n_blocks) * c.block_size) return;
#pragma unroll
  for (int i = 0; i < kRotSlots; ++i)
    if (lane + 32 * i < n_rot) amax = abs_max(abs_max(amax, lo[i]), hi[i]);
#pragma unroll
  for (int i = 0; i < kTailSlots; ++i)
    if (lane + 32 * i < n_tail) amax = abs_max(amax, tail[i]);
  float scale = is_v ? c.v_scale : c.k_scale;
  const int64_t scale_at = static_cast<int64_t>(slot) * c.n_head_kv + h;
  if (c.cache_dtype == DType::kI8) {
    scale = kv_int8_scale_dev(warp_max(amax));
    if (lane == 0) (is_v ? c.v_scales : c.k_scales)[scale_at] = scale;
  }
  void* cache = is_v ? c.v_cache : c.k_cache;
  const int64_t dst = scale_at * hd;
#pragma unroll
  for (int i = 0; i < kRotSlots; ++i) {
    const int u = lane + 32 * i;
    if (u >= n_rot) continue;
    store_cache2(c.cache_dtype, cache, dst + 2 * u, lo[i], scale);
    store_cache2(c.cache_dtype, cache, dst + 2 * u + half, hi[i], scale);
  }
#pragma unroll
  for (int i = 0; i < kTailSlots; ++i) {
    const int u = lane + 32 * i;
    if (u < n_tail) store_cache2(c.cache_dtype, cache, dst + rot + 2 * u, tail[i], scale);
  }
}

// The cos / sin table is built before pdl_wait: positions and inv_freq are the step's inputs,
// copied from the host before its first kernel and written by none, so the table's loads and
// sincosf run under the qkv GEMV this kernel follows instead of after it.
template <bool kSplit>
__global__ void __launch_bounds__(kWarps * 32) rope_kv_write_kernel(ops::RopeKvWriteParams p, SplitArg<kSplit> sy) {
  extern __shared__ float sc[];  // [half] cos, [half] sin
  const ops::RopeParams& r = p.rope;
  const int64_t tok = blockIdx.x;
  const int half = r.rotary_dim / 2;
  const float pos = static_cast<float>(r.positions[tok]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, co;
    sincosf(pos * r.inv_freq[i], &s, &co);  // fp32 angle, as HF computes it (and rope_bf16_kernel)
    sc[i] = co * r.attention_factor;
    sc[half + i] = s * r.attention_factor;
  }
  pdl_wait();
  __syncthreads();
  const int rows = r.n_head + 2 * r.n_head_kv, lane = threadIdx.x & 31;
  for (int row = static_cast<int>(blockIdx.y) * kWarps + (threadIdx.x >> 5); row < rows; row += gridDim.y * kWarps)
    rope_kv_row<kSplit>(p, sy, tok, row, lane, sc);
}

bool aligned(const void* ptr, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0; }

}  // namespace

bool rope_kv_write_fusable(const ops::RopeKvWriteParams& p) {
  const ops::RopeParams& r = p.rope;
  const ops::KvWriteParams& w = p.kv;
  const DType ct = w.cache.cache_dtype;
  const bool cache_ok = ct == DType::kBF16 || ct == DType::kF8E4M3 || ct == DType::kI8 || ct == DType::kF16 ||
                        ct == DType::kF32;
  return r.act_dtype == DType::kBF16 && w.act_dtype == DType::kBF16 && !r.interleaved && r.q != nullptr &&
         r.k != nullptr && w.k == r.k && w.ld_k == r.ld_k && w.n_tokens == r.n_tokens && r.n_tokens <= 0x7fffffff &&
         w.cache.n_head_kv == r.n_head_kv && w.cache.head_dim == r.head_dim && r.head_dim % 2 == 0 &&
         r.head_dim <= kMaxHeadDim && r.rotary_dim % 4 == 0 && r.rotary_dim <= r.head_dim && r.ld_q % 2 == 0 &&
         r.ld_k % 2 == 0 && w.ld_v % 2 == 0 && aligned(r.q, 4) && aligned(r.k, 4) && aligned(w.v, 4) && cache_ok &&
         aligned(w.cache.k_cache, 4) && aligned(w.cache.v_cache, 4) && (r.n_head + 2 * r.n_head_kv) / kWarps < 65535;
}

namespace {
template <bool kSplit>
cudaError_t launch_rope_kv(const ops::RopeKvWriteParams& p, const SplitArg<kSplit>& sy, cudaStream_t stream) {
  if (p.rope.n_tokens == 0) return cudaSuccess;
  const ops::RopeParams& r = p.rope;
  const int64_t ys = r.n_tokens >= kOneBlockTokens ? 1 : ceil_div(r.n_head + 2 * r.n_head_kv, kWarps);
  const dim3 grid(static_cast<unsigned>(r.n_tokens), static_cast<unsigned>(ys));
  return launch_kernel(rope_kv_write_kernel<kSplit>, grid, kWarps * 32, static_cast<size_t>(r.rotary_dim) * sizeof(float),
                       stream, p, sy);
}
}  // namespace

cudaError_t launch_rope_kv_write(const ops::RopeKvWriteParams& p, cudaStream_t stream) {
  return launch_rope_kv<false>(p, NoSplit{}, stream);
}

bool split_rope_kv_write_ok(const ops::MatmulParams& mm, const ops::RopeKvWriteParams& p) {
  const ops::RopeParams& r = p.rope;
  const int64_t q_dim = static_cast<int64_t>(r.n_head) * r.head_dim, kv_dim = static_cast<int64_t>(r.n_head_kv) * r.head_dim;
  const auto* y = static_cast<const uint8_t*>(mm.y);
  return rope_kv_write_fusable(p) && mm.y_dtype == DType::kBF16 && !mm.accumulate && mm.m == r.n_tokens &&
         mm.n == q_dim + 2 * kv_dim && r.q == mm.y && r.k == y + 2 * q_dim && p.kv.v == y + 2 * (q_dim + kv_dim) &&
         r.ld_q == mm.ld_y && r.ld_k == mm.ld_y && p.kv.ld_v == mm.ld_y &&
         (!mm.bias || mm.bias_dtype == DType::kBF16 || mm.bias_dtype == DType::kF16 || mm.bias_dtype == DType::kF32);
}

cudaError_t launch_split_rope_kv_write(const ops::MatmulParams& mm, const float* partials, int splits,
                                       const ops::RopeKvWriteParams& p, cudaStream_t stream) {
  if (!split_rope_kv_write_ok(mm, p) || splits < 1 || partials == nullptr || !aligned(partials, 8)) return cudaErrorInvalidValue;
  return launch_rope_kv<true>(p, make_split_y(mm, partials, splits), stream);
}

}  // namespace frugal::cuda
