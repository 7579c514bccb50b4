// The routed experts' GEMMs for decode of many sequences (every expert active with a few to 64
// rows; moe_experts.cu chooses them), made to stream each chosen expert's weights once, at the
// copy ceiling. "Swap AB": the WEIGHT rows are mma.sync m16n8k16's A operand, loaded straight
// from global memory into registers with 16-byte streaming loads (no shared-memory staging, no
// per-copy index lookup), and the tile's tokens are B (8 per n-tile). The earlier mma.sync and
// WMMA kernels stage the weights through shared memory with the tokens as A: a barrier per K
// stage between a load and its use, and padded 16-row token tiles.
//
// A block: one 64-row tile of one expert (the permute's schedule with bm = kStreamBM, so an
// expert with up to 64 rows has one tile and its weights are read once) and kStreamWarps row
// tiles of 16 weight rows, one a warp, every warp over the whole of K:
//   gate_up: rows g and g + 8 of a warp's tile are gate row c and up row c (c = 8 channels a
//            warp), so one lane holds both g and u of a (channel, token) and h = silu(g) * u is
//            its epilogue (quant_gemv.cu's kSilu pairing);
//   down:    16 consecutive hidden rows, f32 per-pair outputs into l.y.
// Lane (g, q) of a warp loads 16-byte chunk q of each "quad" (4 chunks, 32 k) of rows g and
// g + 8: the chunk's 8 k values are the lane's A slots of two k16 steps (k 0-3 of the chunk as
// step 0's slots 2q, 2q + 1 | 2q + 8, 2q + 9, k 4-7 as step 1's), a fixed permutation of k that
// B follows: lane (g, q) reads the same chunk of token g's row (words 0-1 for step 0, 2-3 for
// step 1). U quads a warp are loaded before any is used, and the next U are issued before the
// current ones are multiplied (double-buffered in registers: 2U KB in flight a warp, 16 warps
// an SM).
// x (gate_up: the tile's token rows gathered through pair_at, each row pointer resolved once a
// block into shared memory; down: the tile's h rows) is staged per slab of kStreamSlabQ quads
// by cp.async, double-buffered: one barrier per slab, and the weight loads in flight pass it.
// Rows are padded so consecutive tokens sit 64 bytes apart modulo 128: the B reads (lane (g, q):
// token g, chunk q) are conflict-free.
// Fixed order: each output is one lane's accumulator over the quads of K in order, each quad's
// two mma steps in order; which tokens share the tile or how many there are changes neither.
// Any K, N and alignment: a block whose expert rows are not 16-byte aligned (or K % 8 != 0)
// loads chunks element by element (zeros past K); rows past N are clamped (loaded, never
// stored), a warp wholly past N loads nothing.
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/moe_layout.cuh"

namespace frugal::cuda::moe {
namespace {

constexpr int kStreamWarps = 8;
constexpr int kStreamSlabQ = 4;                         // quads of K a staged x slab
constexpr int kStreamLd = kStreamSlabQ * 32 + 32;       // bf16 a slab row: 64 bytes of pad
constexpr int kStreamSlabElems = kStreamBM * kStreamLd;
constexpr int kStreamNt = kStreamBM / 8;                // n-tiles of 8 tokens a tile

// 8 k values of a weight row from chunk `chunk` (zeros at or past n_chunks): one streaming load
// (kVec: the row 16-byte aligned, K % 8 == 0), else element by element with zeros past K.
template <bool kVec>
__device__ __forceinline__ uint4 load_w8(const bf16* row, int chunk, int n_chunks, int64_t K) {
  if (chunk >= n_chunks) return make_uint4(0, 0, 0, 0);
  if constexpr (kVec) {
    return load_stream16(row + static_cast<int64_t>(chunk) * 8);
  } else {
    __align__(16) bf16 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int64_t k = static_cast<int64_t>(chunk) * 8 + j;
      v[j] = k < K ? row[k] : __float2bfloat16(0.f);
    }
    return *reinterpret_cast<const uint4*>(v);
  }
}

template <bool kGateUp, int U>
__global__ void __launch_bounds__(kStreamWarps * 32, 2) moe_stream_kernel(ops::MoeExpertsParams p, Layout l) {
  static_assert(kStreamSlabQ % U == 0, "a slab holds whole iterations");
  __shared__ __align__(16) bf16 xs[2][kStreamSlabElems];
  __shared__ const bf16* arow[kStreamBM];
  pdl_wait();
  const int tile = blockIdx.x;
  if (tile >= *l.n_tiles) return;
  const int e = l.tile_expert[tile], r0 = l.tile_row0[tile];
  const int rows = min(kStreamBM, l.offsets[e + 1] - r0), nt = (rows + 7) / 8;
  const int64_t K = kGateUp ? p.hidden : p.inter, N = kGateUp ? p.inter : p.hidden;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  // Rows g and g + 8 of this warp's A tile: gate and up row c, or down rows n and n + 8.
  const int64_t row0 = (static_cast<int64_t>(blockIdx.y) * kStreamWarps + warp) * (kGateUp ? 8 : 16);
  const int64_t row_a = row0 + g, row_b = kGateUp ? row_a : row_a + 8;
  const bf16* w0 = static_cast<const bf16*>(kGateUp ? p.gate[e].data : p.down[e].data);
  const bf16* w1 = kGateUp ? static_cast<const bf16*>(p.up[e].data) : w0;
  const bf16* wa = w0 + (row_a < N ? row_a : N - 1) * K;  // clamped: loaded, never stored
  const bf16* wb = w1 + (row_b < N ? row_b : N - 1) * K;
  const int n_chunks = static_cast<int>((K + 7) / 8), n_quads = (n_chunks + 3) / 4;
  const int n_slabs = (n_quads + kStreamSlabQ - 1) / kStreamSlabQ;
  const int w_chunks = row0 < N ? n_chunks : 0;  // a warp wholly past N loads nothing
  const bool vec_w = K % 8 == 0 && reinterpret_cast<uintptr_t>(w0) % 16 == 0 && reinterpret_cast<uintptr_t>(w1) % 16 == 0;
  const bool vec_x = K % 8 == 0 && a_rows_aligned<kGateUp>(p);

  // x slab `slab` (chunks [slab * 4 kStreamSlabQ, ...) of the tile's 8 nt token rows) into
  // buffer buf: cp.async (zeros past the rows and past K), or element by element when the rows
  // are not 16-byte aligned (plain stores, seen after the next barrier like the copies).
  auto stage = [&](int buf, int slab) {
    constexpr int kUnits = kStreamSlabQ * 4;
    bf16* dst = xs[buf];
    for (int i = threadIdx.x; i < 8 * nt * kUnits; i += kStreamWarps * 32) {
      const int r = i / kUnits, c = i % kUnits, chunk = slab * kUnits + c;
      const bf16* src = arow[r] != nullptr && chunk < n_chunks ? arow[r] + static_cast<int64_t>(chunk) * 8 : nullptr;
      bf16* d = dst + r * kStreamLd + c * 8;
      if (vec_x) {
        cp_async16(d, src != nullptr ? src : static_cast<const bf16*>(p.x), src != nullptr);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) d[j] = src != nullptr && chunk * 8 + j < K ? src[j] : __float2bfloat16(0.f);
      }
    }
    cp_async_commit();
  };

  auto run = [&](auto vec_tag) {
    constexpr bool kVec = decltype(vec_tag)::value;
    auto load = [&](int quad0, uint4 (&va)[U], uint4 (&vb)[U]) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int chunk = (quad0 + u) * 4 + q;
        va[u] = load_w8<kVec>(wa, chunk, w_chunks, K);
        vb[u] = load_w8<kVec>(wb, chunk, w_chunks, K);
      }
    };
    float acc[kStreamNt][4];
#pragma unroll
    for (int t = 0; t < kStreamNt; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][i] = 0.f;
    uint4 va[U], vb[U];
    load(0, va, vb);  // the weights first: in flight while the tile's row pointers are resolved
    tile_a_rows<kGateUp, kStreamBM>(arow, p, l, r0, rows);
    __syncthreads();
    stage(0, 0);
    for (int slab = 0; slab < n_slabs; ++slab) {
      cp_async_wait<0>();
      __syncthreads();  // this slab has landed for every thread; every warp is done with the other buffer
      if (slab + 1 < n_slabs) stage((slab + 1) & 1, slab + 1);
      const bf16* xb = xs[slab & 1];
#pragma unroll
      for (int i = 0; i < kStreamSlabQ; i += U) {
        const int quad = slab * kStreamSlabQ + i;
        if (quad >= n_quads) break;  // block-uniform
        uint4 na[U], nb[U];
        load(quad + U, na, nb);  // the next U quads (zeros past K) in flight while these are used
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const uint32_t a0[4] = {va[u].x, vb[u].x, va[u].y, vb[u].y};
          const uint32_t a1[4] = {va[u].z, vb[u].z, va[u].w, vb[u].w};
          const bf16* xq = xb + g * kStreamLd + ((i + u) * 4 + q) * 8;
#pragma unroll
          for (int t = 0; t < kStreamNt; ++t) {
            if (t >= nt) break;  // block-uniform: n-tiles past the tile's rows
            const uint4 xv = *reinterpret_cast<const uint4*>(xq + 8 * t * kStreamLd);
            mma_bf16(acc[t], a0, xv.x, xv.y);
            mma_bf16(acc[t], a1, xv.z, xv.w);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          va[u] = na[u];
          vb[u] = nb[u];
        }
      }
    }
    // c0, c1: row g, tokens 2q and 2q + 1 of n-tile t; c2, c3: row g + 8 (gate_up: the up row).
#pragma unroll
    for (int t = 0; t < kStreamNt; ++t) {
      if (t >= nt) break;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = 8 * t + 2 * q + i;
        if (r >= rows) continue;
        const int64_t row = r0 + r;
        if constexpr (kGateUp) {
          if (row_a < N) l.h[row * p.inter + row_a] = __float2bfloat16(silu_mul_f(acc[t][i], acc[t][2 + i]));
        } else {
          if (row_a < N) l.y[row * p.hidden + row_a] = acc[t][i];
          if (row_b < N) l.y[row * p.hidden + row_b] = acc[t][2 + i];
        }
      }
    }
  };
  if (vec_w) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
}

template <int U>
cudaError_t launch_u(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream) {
  const unsigned tiles = static_cast<unsigned>(max_tiles(p, kStreamBM));
  const cudaError_t err = launch_kernel(moe_stream_kernel<true, U>, dim3(tiles, static_cast<unsigned>(ceil_div(p.inter, 8 * kStreamWarps))),
                                        kStreamWarps * 32, 0, stream, p, l);
  if (err != cudaSuccess) return err;
  return launch_kernel(moe_stream_kernel<false, U>, dim3(tiles, static_cast<unsigned>(ceil_div(p.hidden, 16 * kStreamWarps))),
                       kStreamWarps * 32, 0, stream, p, l);
}

}  // namespace

cudaError_t launch_stream_gemms(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream) {
  return moe_stream_u() == 2 ? launch_u<2>(p, l, stream) : launch_u<4>(p, l, stream);
}

}  // namespace frugal::cuda::moe

namespace frugal::cuda {

namespace {
// 0: FRUGAL_MOE_STREAM_U (read once), else the quads a warp loads an iteration. Tests and
// benchmarks set it between launches on one thread, nothing else writes it.
int g_moe_stream_u = 0;
}  // namespace

int moe_stream_u() {
  static const int env = [] {
    const char* e = std::getenv("FRUGAL_MOE_STREAM_U");
    return e != nullptr ? std::atoi(e) : 0;
  }();
  const int u = g_moe_stream_u > 0 ? g_moe_stream_u : env;
  return u == 2 ? 2 : 4;
}

void set_moe_stream_u(int u) { g_moe_stream_u = u; }

}  // namespace frugal::cuda
