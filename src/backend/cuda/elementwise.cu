// Row and elementwise ops: embedding, fused residual RMSNorm, RoPE, SiLU-mul, gather, KV write,
// bias add. Each has one simple dtype-generic kernel; RMSNorm, RoPE and SiLU-mul also have a
// bf16 path with 16-byte accesses (and RoPE's sin/cos computed once per token), because at
// prefill sizes the generic ones ran at a third of memory bandwidth (a 2048-token 7B prefill
// spent 7 ms in them). Both paths compute the same float expressions.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"
#include "backend/cuda/split_epilogue.cuh"

namespace frugal::cuda {

namespace {
bool g_pdl = false;
}  // namespace
bool pdl_enabled() { return g_pdl; }
void set_pdl_enabled(bool on) { g_pdl = on; }

namespace {

constexpr int kThreads = 256;

int grid_for(int64_t n, int threads) {
  int64_t blocks = ceil_div(n, threads);
  return static_cast<int>(blocks < 65535 * 8 ? blocks : 65535 * 8);  // grid-stride past this
}

__global__ void embedding_kernel(ops::EmbeddingParams p) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int64_t row = p.ids[t] - p.vocab_begin;  // this shard's row (vocab-parallel), or none
  const bool valid = row >= 0 && row < p.vocab;    // out-of-range ids give zeros, never a wild read
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x) {
    float v = valid ? load_f(p.table_dtype, p.table, row * p.dim + j) : 0.f;
    store_f(p.out_dtype, p.out, t * p.dim + j, v);
  }
}

// One block per row. The residual sum is rounded to act_dtype before it is squared, matching
// the reference: the model normalizes exactly what the residual stream stores.
__global__ void rms_norm_kernel(ops::RmsNormParams p) {
  pdl_wait();
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const DType t = p.act_dtype;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x) {
    float v = load_f(t, p.x, r * p.ld_x + j);
    if (p.residual) {
      v = round_to(t, v + load_f(t, p.residual, r * p.ld_res + j));
      store_f(t, p.residual, r * p.ld_res + j, v);
    }
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = rsqrtf(ss / static_cast<float>(p.dim) + p.eps);
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x) {
    // Same thread, same index as the first pass: reads its own residual write back.
    float v = p.residual ? load_f(t, p.residual, r * p.ld_res + j) : load_f(t, p.x, r * p.ld_x + j);
    store_f(t, p.y, r * p.ld_y + j, v * inv * load_f(p.weight_dtype, p.weight, j));
  }
}

// grid: (n_tokens, n_head + n_head_kv); one thread per rotated pair.
__global__ void rope_kernel(ops::RopeParams p) {
  pdl_wait();
  const int64_t tok = blockIdx.x;
  const int head = blockIdx.y;
  const bool is_q = head < p.n_head;
  void* base = is_q ? p.q : p.k;
  if (base == nullptr) return;
  const int64_t off = tok * (is_q ? p.ld_q : p.ld_k) +
                      static_cast<int64_t>(is_q ? head : head - p.n_head) * p.head_dim;
  const int half = p.rotary_dim / 2;
  const float pos = static_cast<float>(p.positions[tok]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * p.inv_freq[i], &s, &c);  // fp32 angle, as HF computes it
    c *= p.attention_factor;
    s *= p.attention_factor;
    const int64_t i0 = p.interleaved ? off + 2 * i : off + i, i1 = p.interleaved ? i0 + 1 : i0 + half;
    const float2 r = rope_rotate(load_f(p.act_dtype, base, i0), load_f(p.act_dtype, base, i1), c, s);
    store_f(p.act_dtype, base, i0, r.x);
    store_f(p.act_dtype, base, i1, r.y);
  }
}

__global__ void silu_mul_kernel(ops::SiluMulParams p) {
  pdl_wait();
  const int64_t total = p.n_tokens * p.dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t t = i / p.dim, j = i % p.dim;
    float g = load_f(p.act_dtype, p.gate, t * p.ld_gate + j);
    float u = load_f(p.act_dtype, p.up, t * p.ld_up + j);
    store_f(p.act_dtype, p.out, t * p.ld_out + j, silu_mul_f(g, u));
  }
}

__global__ void gather_rows_kernel(ops::GatherRowsParams p) {
  pdl_wait();
  const int64_t i = blockIdx.x;
  const int64_t src = p.rows[i];
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x)
    store_f(p.out_dtype, p.out, i * p.ld_out + j, load_f(p.x_dtype, p.x, src * p.ld_x + j));
}

// grid: n_tokens blocks; a token's k and v rows go to the same slot of both caches.
__global__ void kv_write_kernel(ops::KvWriteParams p) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  const auto& c = p.cache;
  if (slot < 0 || slot >= static_cast<int64_t>(c.n_blocks) * c.block_size) return;
  const int64_t row = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  for (int64_t j = threadIdx.x; j < row; j += blockDim.x) {
    store_f(c.cache_dtype, c.k_cache, slot * row + j, load_f(p.act_dtype, p.k, t * p.ld_k + j));
    store_f(c.cache_dtype, c.v_cache, slot * row + j, load_f(p.act_dtype, p.v, t * p.ld_v + j));
  }
}

// Quantized caches (fp8 e4m3, int8; see kv_quant.cuh): grid n_tokens, one warp per (tensor, kv
// head) row at a time. int8 takes the row's max |x| first (its scale), so rows are warp-wide.
__global__ void kv_write_quant_kernel(ops::KvWriteParams p) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int32_t slot = p.slot_mapping[t];
  const auto& c = p.cache;
  if (slot < 0 || slot >= static_cast<int64_t>(c.n_blocks) * c.block_size) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = blockDim.x >> 5;
  const bool int8 = c.cache_dtype == DType::kI8;
  for (int r = warp; r < 2 * c.n_head_kv; r += n_warps) {
    const bool is_v = r >= c.n_head_kv;
    const int h = is_v ? r - c.n_head_kv : r;
    const int64_t src = t * (is_v ? p.ld_v : p.ld_k) + static_cast<int64_t>(h) * c.head_dim;
    const void* x = is_v ? p.v : p.k;
    const int64_t dst = (static_cast<int64_t>(slot) * c.n_head_kv + h) * c.head_dim;
    if (int8) {
      float amax = 0.f;
      for (int e = lane; e < c.head_dim; e += 32) amax = fmaxf(amax, fabsf(load_f(p.act_dtype, x, src + e)));
      amax = warp_max(amax);
      const float scale = kv_int8_scale_dev(amax);
      if (lane == 0) (is_v ? c.v_scales : c.k_scales)[static_cast<int64_t>(slot) * c.n_head_kv + h] = scale;
      int8_t* out = static_cast<int8_t*>(is_v ? c.v_cache : c.k_cache) + dst;
      for (int e = lane; e < c.head_dim; e += 32) out[e] = kv_int8_code_dev(load_f(p.act_dtype, x, src + e), scale);
    } else {
      const float s = is_v ? c.v_scale : c.k_scale;
      uint8_t* out = static_cast<uint8_t*>(is_v ? c.v_cache : c.k_cache) + dst;
      for (int e = lane; e < c.head_dim; e += 32) out[e] = kv_fp8_code_dev(load_f(p.act_dtype, x, src + e), s);
    }
  }
}

struct BiasAddParams {
  void* y;
  DType y_dtype;
  int64_t ld_y;
  const void* bias;
  DType bias_dtype;
  int64_t m;
  int64_t n;
};

__global__ void bias_add_kernel(BiasAddParams p) {
  pdl_wait();
  const int64_t total = p.m * p.n;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    int64_t r = i / p.n, j = i % p.n;
    float v = load_f(p.y_dtype, p.y, r * p.ld_y + j) + load_f(p.bias_dtype, p.bias, j);
    store_f(p.y_dtype, p.y, r * p.ld_y + j, v);
  }
}

__global__ void fill_uniform_kernel(void* dst, DType t, int64_t n, uint64_t seed, float lo, float hi) {
  pdl_wait();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t z = seed + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    store_f(t, dst, i, lo + (hi - lo) * static_cast<float>(z >> 40) * (1.f / 16777216.f));
  }
}

// ---- bf16 paths: 8 elements (16 bytes) per access ----
__device__ __forceinline__ uint4 pack8(const float f[8]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = __floats2bfloat162_rn(f[2 * e], f[2 * e + 1]);
  return u;
}

bool aligned(const void* ptr, uintptr_t bytes) { return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0; }

// One block per row, VPT 8-element vectors per thread held in registers between the two passes.
// The norm weight is loaded before pdl_wait (no kernel writes it): in decode the kernel is one
// block whose run is a chain of latencies, and the weight load was the last link of it.
// kSplit (split_rms_norm, a matmul_rms_norm's epilogue): x is the matmul's y, made here from its
// partials (split_y8) and written to y before it is normalized, as the reduce kernel then this
// one would (x = mm.y, no residual).
template <int VPT, bool kSplit>
__global__ void rms_norm_bf16_kernel(ops::RmsNormParams p, SplitArg<kSplit> sy) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const int nvec = static_cast<int>(p.dim / 8);
  const auto* w = static_cast<const __nv_bfloat16*>(p.weight);
  uint4 wraw[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int idx = threadIdx.x + k * blockDim.x;
    wraw[k] = idx < nvec ? *reinterpret_cast<const uint4*>(w + idx * 8) : make_uint4(0, 0, 0, 0);
  }
  pdl_wait();
  const auto* x = static_cast<const __nv_bfloat16*>(p.x) + r * p.ld_x;
  auto* res = static_cast<__nv_bfloat16*>(p.residual) + (p.residual ? r * p.ld_res : 0);
  float v[VPT][8];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int idx = threadIdx.x + k * blockDim.x;
    if (idx >= nvec) continue;
    if constexpr (kSplit) {
      split_y8(sy, r, static_cast<int64_t>(idx) * 8, v[k]);
      *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(sy.mm.y) + r * sy.mm.ld_y + idx * 8) = pack8(v[k]);
    } else {
      unpack_bf16x8(*reinterpret_cast<const uint4*>(x + idx * 8), v[k]);
      if (p.residual) {
        float rv[8];
        unpack_bf16x8(*reinterpret_cast<const uint4*>(res + idx * 8), rv);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[k][e] = __bfloat162float(__float2bfloat16(v[k][e] + rv[e]));
        *reinterpret_cast<uint4*>(res + idx * 8) = pack8(v[k]);
      }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) ss += v[k][e] * v[k][e];
  }
  ss = block_sum(ss, red);
  const float inv = rsqrtf(ss / static_cast<float>(p.dim) + p.eps);
  auto* y = static_cast<__nv_bfloat16*>(p.y) + r * p.ld_y;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int idx = threadIdx.x + k * blockDim.x;
    if (idx >= nvec) continue;
    float wf[8], o[8];
    unpack_bf16x8(wraw[k], wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = v[k][e] * inv * wf[e];
    *reinterpret_cast<uint4*>(y + idx * 8) = pack8(o);
  }
}

bool rms_norm_bf16_ok(const ops::RmsNormParams& p) {
  return p.act_dtype == DType::kBF16 && p.weight_dtype == DType::kBF16 && p.dim % 8 == 0 && p.dim / 8 <= 4 * 1024 &&
         p.ld_x % 8 == 0 && p.ld_y % 8 == 0 && (!p.residual || p.ld_res % 8 == 0) && aligned(p.x, 16) &&
         aligned(p.y, 16) && aligned(p.weight, 16) && (!p.residual || aligned(p.residual, 16));
}

// One block per token: cos/sin of each rotated pair once (shared by every head), then pairs of
// adjacent rotated elements (bf16x2) of every q and k head.
__global__ void rope_bf16_kernel(ops::RopeParams p) {
  pdl_wait();
  extern __shared__ float sc[];  // [half] cos, [half] sin
  const int64_t tok = blockIdx.x;
  const int half = p.rotary_dim / 2;
  const float pos = static_cast<float>(p.positions[tok]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s, c;
    sincosf(pos * p.inv_freq[i], &s, &c);  // fp32 angle, as HF computes it
    sc[i] = c * p.attention_factor;
    sc[half + i] = s * p.attention_factor;
  }
  __syncthreads();
  const int per_head = half / 2;
  const int n_items = (p.n_head + p.n_head_kv) * per_head;
  for (int w = threadIdx.x; w < n_items; w += blockDim.x) {
    const int head = w / per_head, i = (w - head * per_head) * 2;
    const bool is_q = head < p.n_head;
    auto* base = static_cast<__nv_bfloat16*>(is_q ? p.q : p.k) + tok * (is_q ? p.ld_q : p.ld_k) +
                 static_cast<int64_t>(is_q ? head : head - p.n_head) * p.head_dim;
    const float2 x0 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(base + i));
    const float2 x1 = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(base + i + half));
    const float2 a = rope_rotate(x0.x, x1.x, sc[i], sc[half + i]), b = rope_rotate(x0.y, x1.y, sc[i + 1], sc[half + i + 1]);
    *reinterpret_cast<__nv_bfloat162*>(base + i) = __floats2bfloat162_rn(a.x, b.x);
    *reinterpret_cast<__nv_bfloat162*>(base + i + half) = __floats2bfloat162_rn(a.y, b.y);
  }
}

bool rope_bf16_ok(const ops::RopeParams& p) {
  return p.act_dtype == DType::kBF16 && !p.interleaved && p.q != nullptr && p.k != nullptr && p.rotary_dim % 4 == 0 &&
         p.head_dim % 2 == 0 && p.ld_q % 2 == 0 && p.ld_k % 2 == 0 && aligned(p.q, 4) && aligned(p.k, 4);
}

// grid (vectors of a row / threads, n_tokens).
__global__ void silu_mul_bf16_kernel(ops::SiluMulParams p) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v * 8 >= p.dim) return;
  float g[8], u[8], o[8];
  unpack_bf16x8(*reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.gate) + t * p.ld_gate + v * 8), g);
  unpack_bf16x8(*reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.up) + t * p.ld_up + v * 8), u);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = silu_mul_f(g[e], u[e]);
  *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + t * p.ld_out + v * 8) = pack8(o);
}

// silu_mul over a split matmul's [gate | up] halves (split_silu_mul, a matmul_silu_mul's
// epilogue): gate and up made from the partials (split_y8), then silu_mul_bf16_kernel's
// arithmetic; the matmul's y is not written.
__global__ void split_silu_mul_bf16_kernel(ops::SiluMulParams p, SplitY sy) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v * 8 >= p.dim) return;
  float g[8], u[8], o[8];
  split_y8(sy, t, v * 8, g);
  split_y8(sy, t, p.dim + v * 8, u);
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = silu_mul_f(g[e], u[e]);
  *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + t * p.ld_out + v * 8) = pack8(o);
}

bool silu_mul_bf16_ok(const ops::SiluMulParams& p) {
  return p.act_dtype == DType::kBF16 && p.dim % 8 == 0 && p.ld_gate % 8 == 0 && p.ld_up % 8 == 0 &&
         p.ld_out % 8 == 0 && p.n_tokens <= 65535 && aligned(p.gate, 16) && aligned(p.up, 16) && aligned(p.out, 16);
}

int row_threads(int64_t dim) {
  if (dim >= 1024) return 1024;
  if (dim >= 512) return 512;
  if (dim >= 256) return 256;
  if (dim >= 128) return 128;
  return 64;
}

}  // namespace

cudaError_t launch_embedding(const ops::EmbeddingParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  return launch_kernel(embedding_kernel, static_cast<unsigned>(p.n_tokens), row_threads(p.dim), 0, stream, p);
}

namespace {
bool float_dtype(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

// rms_norm_bf16_kernel's launch: VPT vectors a thread, the fewest warps that cover the row.
template <bool kSplit>
cudaError_t launch_rms_norm_bf16(const ops::RmsNormParams& p, const SplitArg<kSplit>& sy,
                                 cudaStream_t stream) {
  const int64_t nvec = p.dim / 8;
  const int vpt = nvec <= 1024 ? 1 : nvec <= 2048 ? 2 : 4;
  const int threads = static_cast<int>(std::max<int64_t>(32, ceil_div(ceil_div(nvec, vpt), 32) * 32));
  const unsigned rows = static_cast<unsigned>(p.rows);
  if (vpt == 1) return launch_kernel(rms_norm_bf16_kernel<1, kSplit>, rows, threads, 0, stream, p, sy);
  if (vpt == 2) return launch_kernel(rms_norm_bf16_kernel<2, kSplit>, rows, threads, 0, stream, p, sy);
  return launch_kernel(rms_norm_bf16_kernel<4, kSplit>, rows, threads, 0, stream, p, sy);
}

// What split_y8 reads: bf16 y, n a multiple of 8 (whole 8-row vectors, none straddling two
// tokens), 16-byte aligned partials.
bool split_y_ok(const ops::MatmulParams& mm, const float* partials, int splits) {
  return splits >= 1 && partials != nullptr && aligned(partials, 16) && mm.y_dtype == DType::kBF16 && mm.n % 8 == 0 &&
         mm.m > 0 && (!mm.bias || float_dtype(mm.bias_dtype));
}
}  // namespace

cudaError_t launch_rms_norm(const ops::RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (rms_norm_bf16_ok(p)) return launch_rms_norm_bf16<false>(p, NoSplit{}, stream);
  return launch_kernel(rms_norm_kernel, static_cast<unsigned>(p.rows), row_threads(p.dim), 0, stream, p);
}

bool split_rms_norm_ok(const ops::MatmulParams& mm, const ops::RmsNormParams& norm) {
  return rms_norm_bf16_ok(norm) && norm.residual == nullptr && norm.x == mm.y && norm.ld_x == mm.ld_y &&
         norm.rows == mm.m && norm.dim == mm.n && norm.rows <= 0x7fffffff && mm.y_dtype == DType::kBF16 && mm.n % 8 == 0 &&
         (!mm.bias || float_dtype(mm.bias_dtype));
}

cudaError_t launch_split_rms_norm(const ops::MatmulParams& mm, const float* partials, int splits,
                                  const ops::RmsNormParams& norm, cudaStream_t stream) {
  if (!split_rms_norm_ok(mm, norm) || !split_y_ok(mm, partials, splits)) return cudaErrorInvalidValue;
  return launch_rms_norm_bf16<true>(norm, make_split_y(mm, partials, splits), stream);
}

int split_load_batch() {
  static const int batch = [] {
    const char* e = std::getenv("FRUGAL_SPLIT_BATCH");
    const int b = e ? std::atoi(e) : kSplitBatchMax;
    return b >= 1 && b <= kSplitBatchMax ? b : kSplitBatchMax;
  }();
  return batch;
}

bool split_silu_mul_ok(const ops::MatmulParams& mm, const ops::SiluMulParams& act) {
  return silu_mul_bf16_ok(act) && !mm.accumulate && mm.y_dtype == DType::kBF16 && mm.n == 2 * act.dim &&
         act.n_tokens == mm.m && act.gate == mm.y && act.ld_gate == mm.ld_y && act.ld_up == mm.ld_y &&
         act.up == static_cast<const uint8_t*>(mm.y) + 2 * act.dim && (!mm.bias || float_dtype(mm.bias_dtype));
}

cudaError_t launch_split_silu_mul(const ops::MatmulParams& mm, const float* partials, int splits,
                                  const ops::SiluMulParams& act, cudaStream_t stream) {
  if (!split_silu_mul_ok(mm, act) || !split_y_ok(mm, partials, splits)) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(ceil_div(act.dim / 8, kThreads)), static_cast<unsigned>(act.n_tokens));
  return launch_kernel(split_silu_mul_bf16_kernel, grid, kThreads, 0, stream, act, make_split_y(mm, partials, splits));
}

cudaError_t launch_rope(const ops::RopeParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  if (rope_bf16_ok(p) && p.n_tokens <= 0x7fffffff)
    return launch_kernel(rope_bf16_kernel, static_cast<unsigned>(p.n_tokens), 256,
                         static_cast<size_t>(p.rotary_dim) * sizeof(float), stream, p);
  dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head + p.n_head_kv));
  int threads = p.rotary_dim / 2 >= 64 ? 64 : 32;
  return launch_kernel(rope_kernel, grid, threads, 0, stream, p);
}

cudaError_t launch_silu_mul(const ops::SiluMulParams& p, cudaStream_t stream) {
  if (p.n_tokens * p.dim == 0) return cudaSuccess;
  if (silu_mul_bf16_ok(p)) {
    const dim3 grid(static_cast<unsigned>(ceil_div(p.dim / 8, kThreads)), static_cast<unsigned>(p.n_tokens));
    return launch_kernel(silu_mul_bf16_kernel, grid, kThreads, 0, stream, p);
  }
  return launch_kernel(silu_mul_kernel, grid_for(p.n_tokens * p.dim, kThreads), kThreads, 0, stream, p);
}

cudaError_t launch_gather_rows(const ops::GatherRowsParams& p, cudaStream_t stream) {
  if (p.n_rows == 0) return cudaSuccess;
  return launch_kernel(gather_rows_kernel, static_cast<unsigned>(p.n_rows), row_threads(p.dim), 0, stream, p);
}

cudaError_t launch_kv_write(const ops::KvWriteParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  if (p.cache.cache_dtype == DType::kF8E4M3 || p.cache.cache_dtype == DType::kI8) {
    const int warps = 2 * p.cache.n_head_kv < 16 ? 2 * p.cache.n_head_kv : 16;
    return launch_kernel(kv_write_quant_kernel, static_cast<unsigned>(p.n_tokens), 32 * warps, 0, stream, p);
  }
  int64_t row = static_cast<int64_t>(p.cache.n_head_kv) * p.cache.head_dim;
  return launch_kernel(kv_write_kernel, static_cast<unsigned>(p.n_tokens), row_threads(row), 0, stream, p);
}

cudaError_t launch_bias_add(void* y, DType y_dtype, int64_t ld_y, const void* bias, DType bias_dtype,
                            int64_t m, int64_t n, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  BiasAddParams p{y, y_dtype, ld_y, bias, bias_dtype, m, n};
  return launch_kernel(bias_add_kernel, grid_for(m * n, kThreads), kThreads, 0, stream, p);
}

cudaError_t launch_fill_uniform(void* dst, DType t, int64_t n, uint64_t seed, float lo, float hi,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_kernel(fill_uniform_kernel, grid_for(n, kThreads), kThreads, 0, stream, dst, t, n, seed, lo, hi);
}

}  // namespace frugal::cuda
