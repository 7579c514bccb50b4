// Row and elementwise ops: embedding, fused residual RMSNorm, RoPE, SiLU-mul, gather, KV write,
// bias add. All are memory-bound and tiny next to the GEMVs, so they favour one simple
// dtype-generic kernel each over vectorized per-dtype variants.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"

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
  const int64_t id = p.ids[t];
  const bool valid = id >= 0 && id < p.vocab;  // out-of-range ids give zeros, never a wild read
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x) {
    float v = valid ? load_f(p.table_dtype, p.table, id * p.dim + j) : 0.f;
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
    float x0 = load_f(p.act_dtype, base, off + i), x1 = load_f(p.act_dtype, base, off + i + half);
    store_f(p.act_dtype, base, off + i, x0 * c - x1 * s);
    store_f(p.act_dtype, base, off + i + half, x1 * c + x0 * s);
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
    store_f(p.act_dtype, p.out, t * p.ld_out + j, g / (1.f + __expf(-g)) * u);
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

cudaError_t launch_rms_norm(const ops::RmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  return launch_kernel(rms_norm_kernel, static_cast<unsigned>(p.rows), row_threads(p.dim), 0, stream, p);
}

cudaError_t launch_rope(const ops::RopeParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head + p.n_head_kv));
  int threads = p.rotary_dim / 2 >= 64 ? 64 : 32;
  return launch_kernel(rope_kernel, grid, threads, 0, stream, p);
}

cudaError_t launch_silu_mul(const ops::SiluMulParams& p, cudaStream_t stream) {
  if (p.n_tokens * p.dim == 0) return cudaSuccess;
  return launch_kernel(silu_mul_kernel, grid_for(p.n_tokens * p.dim, kThreads), kThreads, 0, stream, p);
}

cudaError_t launch_gather_rows(const ops::GatherRowsParams& p, cudaStream_t stream) {
  if (p.n_rows == 0) return cudaSuccess;
  return launch_kernel(gather_rows_kernel, static_cast<unsigned>(p.n_rows), row_threads(p.dim), 0, stream, p);
}

cudaError_t launch_kv_write(const ops::KvWriteParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
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
