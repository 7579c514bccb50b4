// Attention fallback for what the fast kernels do not take (f32/f16 activations or cache,
// head dims other than 64/128): one block per (token, head), keys in chunks with an online
// softmax across chunks. Any cache dtype (fp8/int8 read through kv_quant.cuh with their
// scales) and attention sinks (the sink keys [0, S) below the window are a first key range).
// Slow; exists so every op runs on every input the contract allows.
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/kv_quant.cuh"

namespace frugal::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 512;

// smem: scores [kChunk], acc [head_dim], reduction [32], softmax state [2]
__global__ void __launch_bounds__(kThreads) attention_generic_kernel(ops::AttentionParams p) {
  pdl_wait();
  extern __shared__ float smem[];
  float* ss = smem;
  float* acc = ss + kChunk;
  float* red = acc + p.cache.head_dim;
  const auto& c = p.cache;
  // Token indices are absolute (q_start[0] > 0 when a caller passes the tail of a step).
  const int t = blockIdx.x + p.q_start[0], h = blockIdx.y, D = c.head_dim;
  int seq = 0;
  while (seq + 1 < p.n_seqs && p.q_start[seq + 1] <= t) ++seq;  // sequences are few; a scan is fine
  const int q0 = p.q_start[seq], n_q = p.q_start[seq + 1] - q0, ctx = p.ctx_len[seq];
  const int pos = ctx - n_q + (t - q0);
  const int lo = p.sliding_window > 0 ? max(0, pos - p.sliding_window + 1) : 0;
  const int kvh = h / (p.n_head / c.n_head_kv);
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  for (int d = threadIdx.x; d < D; d += kThreads) acc[d] = 0.f;
  float m_run = -INFINITY, l_run = 0.f;  // identical in every thread
  const int sink_end = p.sliding_window > 0 ? min(p.sink_tokens, lo) : 0;
  for (int range = sink_end > 0 ? 0 : 1; range < 2; ++range) {
  const int r_lo = range == 0 ? 0 : lo, r_end = range == 0 ? sink_end : pos + 1;
  for (int k0 = r_lo; k0 < r_end; k0 += kChunk) {
    const int n = min(kChunk, r_end - k0);
    for (int jj = threadIdx.x; jj < n; jj += kThreads) {
      const int j = k0 + jj;
      const int64_t slot = static_cast<int64_t>(table[j / c.block_size]) * c.block_size + j % c.block_size;
      float s = 0.f;
      for (int d = 0; d < D; ++d)
        s += load_f(p.act_dtype, p.q, t * p.ld_q + h * D + d) * kv_load_scaled(c, false, slot, kvh, d);
      ss[jj] = s * p.scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int jj = threadIdx.x; jj < n; jj += kThreads) m = fmaxf(m, ss[jj]);
    const float m_new = fmaxf(m_run, block_max(m, red));
    const float alpha = __expf(m_run - m_new);
    float l = 0.f;
    for (int jj = threadIdx.x; jj < n; jj += kThreads) {
      ss[jj] = __expf(ss[jj] - m_new);
      l += ss[jj];
    }
    l_run = l_run * alpha + block_sum(l, red);  // block_sum syncs, so ss is complete below
    m_run = m_new;
    for (int d = threadIdx.x; d < D; d += kThreads) {
      float a = acc[d] * alpha;
      for (int jj = 0; jj < n; ++jj) {
        const int j = k0 + jj;
        const int64_t slot = static_cast<int64_t>(table[j / c.block_size]) * c.block_size + j % c.block_size;
        a += ss[jj] * kv_load_scaled(c, true, slot, kvh, d);
      }
      acc[d] = a;
    }
    __syncthreads();
  }
  }
  for (int d = threadIdx.x; d < D; d += kThreads)
    store_f(p.act_dtype, p.out, t * p.ld_out + h * D + d, l_run > 0.f ? acc[d] / l_run : 0.f);
}

}  // namespace

cudaError_t launch_attention_generic(const ops::AttentionParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0 || p.n_seqs == 0) return cudaSuccess;
  const size_t smem = (kChunk + p.cache.head_dim + 32) * sizeof(float);
  dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(p.n_head));
  return launch_kernel(attention_generic_kernel, grid, kThreads, smem, stream, p);
}

}  // namespace frugal::cuda
