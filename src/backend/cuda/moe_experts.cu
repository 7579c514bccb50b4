// DeepSeekMoE routed experts over tokens grouped by expert (ops::MoeExpertsParams), bf16
// activations and dense bf16 expert weights, all on the device with no host sync on the routing
// (so a step with it is captured into a graph; buffers are sized for the worst case):
//   1. permute: one block counts the (token, k) pairs per expert, scans, lays out tiles of BM
//      rows per expert (a schedule of at most ceil(pairs / BM) + min(E, pairs) tiles) and gives
//      each pair its row in the expert-sorted order;
//   2. gate_up: per (tile, 64 columns of inter) a tensor-core (mma.sync or WMMA bf16, f32
//      accumulate) GEMM of the tile's gathered x rows against the expert's gate and up rows,
//      h = silu(g) * u;
//   3. down: the same over h rows against the expert's down rows (128 or 64 columns a block),
//      f32 per-pair outputs;
//   4. combine: out[t] += sum_k topk_weight[t, k] * y[row(t, k)], in k order.
// An expert-parallel rank holds experts [first_expert, first_expert + n_experts) of the n_routed
// topk_idx ranges over: 1. counts and rows only the pairs routed to those (global id g is local
// expert g - first_expert), a pair routed elsewhere gets row -1 and 4. skips it (it adds nothing,
// the other rank adds it); the tiles of 2. and 3. cover the local rows only. An id outside
// [0, n_routed) (the host cannot check device memory) is treated as another rank's: never an
// out-of-bounds read or write.
// Only the chosen experts' weights are read (once per tile), so batch-1 decode reads top_k
// experts, not all of them. While experts see few rows each (decode: at most 4 on average), 2.
// and 3. are GEMVs instead (tiles of kGemvRows rows; each warp streams one weight row per
// matrix with 16-byte loads, several in flight, for every row of the tile): the tensor-core
// tiles would be mostly padding there, and their synchronous loads keep too few bytes in flight
// to reach the memory bandwidth. From there to 64 rows per expert on average (decode of many
// sequences: every expert active, the step reads all routed weights, 1.1 GB a V2-Lite layer)
// 2. and 3. are the streaming "swap AB" kernels of moe_stream.cu over 64-row tiles: each
// expert's weights stream once for all its rows, straight from global memory into the mma A
// registers with several 16-byte loads in flight a lane (FRUGAL_MOE_STREAM=0: the WMMA tiles;
// =all: at every size). The WMMA tiles (16 rows below 48 per expert, 64 above) read the weights
// of a 24-row expert twice and stage them through shared memory (43% of the copy ceiling at 256
// tokens); the mma.sync kernels below (moe_mma_kernel, 64-row tiles, weights staged by cp.async)
// measured slower still and run only where asked for (FRUGAL_MOE_MMA=1; =all for every size).
// Every output element is a fixed-order reduction whatever else is in the step (tile contents
// change which rows share an MMA, not any row's sum); the path itself goes by the step's rows
// per expert, so a row's rounding may differ between a decode and a prefill step.
// Steps of at most moe_tiny_pairs() (token, expert) pairs (batch-1/2 decode) skip all of this:
// moe_tiny.cu's two kernels, with the shared experts fused in (MoePath::kTiny). Elsewhere the
// shared experts run after the combine as the backend's own ops (cuda_backend.cpp).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <mma.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/moe_layout.cuh"

namespace frugal::cuda {
namespace {

using namespace moe;
constexpr int kBN = 64, kBK = 64, kThreads = 128, kPad = 8;

__global__ void __launch_bounds__(1024) moe_permute_kernel(ops::MoeExpertsParams p, Layout l, int bm) {
  pdl_wait();
  __shared__ int32_t count[ops::kMoeMaxExperts], cursor[ops::kMoeMaxExperts], tile0[ops::kMoeMaxExperts + 1];
  const int E = p.n_experts;
  const int64_t pairs = p.n_tokens * p.top_k;
  for (int e = threadIdx.x; e < E; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int e = local_expert(p, i);
    if (e >= 0) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t off = 0, t = 0;
    for (int e = 0; e < E; ++e) {
      cursor[e] = off;
      l.offsets[e] = off;
      tile0[e] = t;
      off += count[e];
      t += (count[e] + bm - 1) / bm;
    }
    l.offsets[E] = off;
    tile0[E] = t;
    *l.n_tiles = t;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x)
    for (int32_t j = tile0[e]; j < tile0[e + 1]; ++j) {
      l.tile_expert[j] = e;
      l.tile_row0[j] = cursor[e] + (j - tile0[e]) * bm;
    }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int e = local_expert(p, i);
    const int32_t r = e >= 0 ? atomicAdd(&cursor[e], 1) : -1;
    l.row_of_pair[i] = r;
    if (r >= 0) l.pair_at[r] = static_cast<int32_t>(i);
  }
}

// The pipelined main loop (vector-aligned operands, K a multiple of kPBK): kStages stages of
// kPBK-deep A and B tiles in flight through cp.async while the tensor cores work on the oldest.
constexpr int kPBK = 32, kStages = 3, kPLd = kPBK + 8;
template <int BM, int kNB>
constexpr int kPipeBytes = kStages * (BM + kNB * kBN) * kPLd * 2;

// One tile: rows [r0, r0 + rows) of the expert-sorted order, output columns [c0, c0 + 64) of
// N (inter for gate_up, hidden for down), reduced over K (hidden, or inter). A row comes from x
// (gathered by token, kGateUp) or from h; B rows are the expert's weight rows ([N, K] row-major,
// read as a column-major K x N matrix).
template <int BM, bool kGateUp>
__global__ void __launch_bounds__(kThreads) moe_gemm_kernel(ops::MoeExpertsParams p, Layout l, bool pipeline) {
  using namespace nvcuda;
  pdl_wait();
  const int tile = blockIdx.x;
  if (tile >= *l.n_tiles) return;
  const int e = l.tile_expert[tile], r0 = l.tile_row0[tile];
  const int rows = min(BM, l.offsets[e + 1] - r0);
  const int c0 = blockIdx.y * kBN;
  const int64_t K = kGateUp ? p.hidden : p.inter, N = kGateUp ? p.inter : p.hidden;
  constexpr int kNB = kGateUp ? 2 : 1;
  constexpr int kLd = kBK + kPad;                  // bf16 elements per smem row
  constexpr int kAB = (BM + kNB * kBN) * kLd * 2;  // bytes of the A and B tiles
  constexpr int kC = kNB * BM * (kBN + 4) * 4;     // bytes of the f32 results
  constexpr int kP = kPipeBytes<BM, kNB>;
  constexpr int kMax = kAB > kC ? (kAB > kP ? kAB : kP) : (kC > kP ? kC : kP);
  __shared__ __align__(128) uint8_t smem[kMax];
  bf16* As = reinterpret_cast<bf16*>(smem);
  bf16* Bs = As + BM * kLd;  // kNB blocks of [kBN][kLd]
  const bf16* wmat[kNB];
  wmat[0] = static_cast<const bf16*>(kGateUp ? p.gate[e].data : p.down[e].data);
  if constexpr (kGateUp) wmat[kNB - 1] = static_cast<const bf16*>(p.up[e].data);
  __shared__ const bf16* arow[BM];
  tile_a_rows<kGateUp, BM>(arow, p, l, r0, rows);
  __syncthreads();
  const bool vec_a = a_rows_aligned<kGateUp>(p) && K % 8 == 0;
  bool vec_b = K % 8 == 0;
#pragma unroll
  for (int b = 0; b < kNB; ++b) vec_b = vec_b && reinterpret_cast<uintptr_t>(wmat[b]) % 16 == 0;
  const int warp = threadIdx.x / 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kNB][BM / 16];
#pragma unroll
  for (int b = 0; b < kNB; ++b)
#pragma unroll
    for (int i = 0; i < BM / 16; ++i) wmma::fill_fragment(acc[b][i], 0.f);

  if (pipeline && vec_a && vec_b && K % kPBK == 0) {
    const int KT = static_cast<int>(K / kPBK);
    constexpr int kStageElems = (BM + kNB * kBN) * kPLd;
    bf16* stage0 = reinterpret_cast<bf16*>(smem);
    auto load_stage = [&](int st, int kt) {
      bf16* as = stage0 + st * kStageElems;
      bf16* bs = as + BM * kPLd;
      const int64_t k0 = static_cast<int64_t>(kt) * kPBK;
      for (int idx = threadIdx.x; idx < BM * (kPBK / 8); idx += kThreads) {
        const int r = idx / (kPBK / 8), c = (idx % (kPBK / 8)) * 8;
        const bf16* src = arow[r];
        cp_async16(as + r * kPLd + c, src ? src + k0 + c : static_cast<const bf16*>(p.x), src != nullptr);
      }
      for (int idx = threadIdx.x; idx < kNB * kBN * (kPBK / 8); idx += kThreads) {
        const int b = idx / (kBN * (kPBK / 8)), rem = idx % (kBN * (kPBK / 8));
        const int n = rem / (kPBK / 8), c = (rem % (kPBK / 8)) * 8;
        const bool in_n = c0 + n < N;
        cp_async16(bs + (b * kBN + n) * kPLd + c, in_n ? wmat[b] + (c0 + n) * K + k0 + c : wmat[b], in_n);
      }
    };
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < KT) load_stage(st, st);
      cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // stage kt % kStages has landed for every thread; the one loaded next is free
      if (kt + kStages - 1 < KT) load_stage((kt + kStages - 1) % kStages, kt + kStages - 1);
      cp_async_commit();
      const bf16* as = stage0 + (kt % kStages) * kStageElems;
      const bf16* bs = as + BM * kPLd;
#pragma unroll
      for (int kk = 0; kk < kPBK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[BM / 16];
#pragma unroll
        for (int i = 0; i < BM / 16; ++i) wmma::load_matrix_sync(a[i], as + i * 16 * kPLd + kk, kPLd);
#pragma unroll
        for (int b = 0; b < kNB; ++b) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> bf;
          wmma::load_matrix_sync(bf, bs + (b * kBN + warp * 16) * kPLd + kk, kPLd);
#pragma unroll
          for (int i = 0; i < BM / 16; ++i) wmma::mma_sync(acc[b][i], a[i], bf, acc[b][i]);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the stages are free for the results
  } else
  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    // A: BM x kBK, 8 values per step.
    for (int idx = threadIdx.x; idx < BM * (kBK / 8); idx += kThreads) {
      const int r = idx / (kBK / 8), c = (idx % (kBK / 8)) * 8;
      bf16* dst = As + r * kLd + c;
      const bf16* src = arow[r];
      if (src && vec_a && k0 + c + 8 <= K) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src + k0 + c);
      } else {
        for (int j = 0; j < 8; ++j) dst[j] = src && k0 + c + j < K ? src[k0 + c + j] : __float2bfloat16(0.f);
      }
    }
    // B: kNB blocks of kBN weight rows x kBK.
    for (int idx = threadIdx.x; idx < kNB * kBN * (kBK / 8); idx += kThreads) {
      const int b = idx / (kBN * (kBK / 8)), rem = idx % (kBN * (kBK / 8));
      const int n = rem / (kBK / 8), c = (rem % (kBK / 8)) * 8;
      bf16* dst = Bs + (b * kBN + n) * kLd + c;
      const bool in_n = c0 + n < N;
      const bf16* src = wmat[b] + (c0 + n) * K + k0 + c;
      if (in_n && vec_b && k0 + c + 8 <= K) {
        *reinterpret_cast<uint4*>(dst) = __ldg(reinterpret_cast<const uint4*>(src));
      } else {
        for (int j = 0; j < 8; ++j) dst[j] = in_n && k0 + c + j < K ? src[j] : __float2bfloat16(0.f);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a[BM / 16];
#pragma unroll
      for (int i = 0; i < BM / 16; ++i) wmma::load_matrix_sync(a[i], As + i * 16 * kLd + kk, kLd);
#pragma unroll
      for (int b = 0; b < kNB; ++b) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> bf;
        wmma::load_matrix_sync(bf, Bs + (b * kBN + warp * 16) * kLd + kk, kLd);
#pragma unroll
        for (int i = 0; i < BM / 16; ++i) wmma::mma_sync(acc[b][i], a[i], bf, acc[b][i]);
      }
    }
    __syncthreads();
  }
  float* Cs = reinterpret_cast<float*>(smem);  // kNB blocks of [BM][kBN + 4]
  constexpr int kLdc = kBN + 4;
#pragma unroll
  for (int b = 0; b < kNB; ++b)
#pragma unroll
    for (int i = 0; i < BM / 16; ++i)
      wmma::store_matrix_sync(Cs + b * BM * kLdc + i * 16 * kLdc + warp * 16, acc[b][i], kLdc, wmma::mem_row_major);
  __syncthreads();
  for (int idx = threadIdx.x; idx < BM * kBN; idx += kThreads) {
    const int r = idx / kBN, c = idx % kBN;
    if (r >= rows || c0 + c >= N) continue;
    const int64_t row = r0 + r;
    if constexpr (kGateUp) {
      const float g = Cs[r * kLdc + c], u = Cs[BM * kLdc + r * kLdc + c];
      l.h[row * p.inter + c0 + c] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
    } else {
      l.y[row * p.hidden + c0 + c] = Cs[r * kLdc + c];
    }
  }
}

// The mma.sync form over tiles of up to kMmaBM rows (made for decode of many sequences: every
// expert active with 8..64 rows): a block computes all of a tile's rows (the permute's tiles
// with bm = kMmaBM, so one tile an expert up to 64 rows) for kMmaBRows weight rows (gate_up: 64
// columns of gate and the same 64 of up; down: 128 columns), streaming that weight slice once
// through kMmaStages stages of kMmaBK-deep tiles (A, the tile's gathered rows, staged with it).
// Each warp owns 16 columns of each 64-row half of the B tile; 16-row MMA tiles past the
// expert's rows are skipped, so compute follows the row count while the weights are read once.
constexpr int kMmaBM = 64, kMmaBRows = 128, kMmaBK = 64, kMmaStages = 4, kMmaLd = kMmaBK + 8;
constexpr int kMmaStageElems = (kMmaBM + kMmaBRows) * kMmaLd;
constexpr size_t kMmaSmem = size_t{kMmaStages} * kMmaStageElems * sizeof(bf16);
template <bool kGateUp>
constexpr int kMmaBN = kGateUp ? kMmaBRows / 2 : kMmaBRows;  // output columns a block

// 8 bf16 values from src (left of them in bounds; nullptr: none) into 16-byte aligned smem:
// cp.async where vec (16-byte aligned rows, left a multiple of 8), else scalar loads (seen by
// the consumer after the pipeline's next __syncthreads like the async copies); zeros past left.
__device__ __forceinline__ void load_chunk8(bf16* dst, const bf16* src, int64_t left, bool vec, const void* any) {
  if (src == nullptr || left <= 0) {
    cp_async16(dst, any, false);
  } else if (vec) {
    cp_async16(dst, src, true);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) dst[j] = j < left ? src[j] : __float2bfloat16(0.f);
  }
}

template <bool kGateUp>
__global__ void __launch_bounds__(kThreads) moe_mma_kernel(ops::MoeExpertsParams p, Layout l) {
  pdl_wait();
  const int tile = blockIdx.x;
  if (tile >= *l.n_tiles) return;
  const int e = l.tile_expert[tile], r0 = l.tile_row0[tile];
  const int rows = min(kMmaBM, l.offsets[e + 1] - r0), m_tiles = (rows + 15) / 16;
  constexpr int kBNo = kMmaBN<kGateUp>;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kBNo;
  const int64_t K = kGateUp ? p.hidden : p.inter, N = kGateUp ? p.inter : p.hidden;
  const bf16* w0 = static_cast<const bf16*>(kGateUp ? p.gate[e].data : p.down[e].data);
  const bf16* w1 = kGateUp ? static_cast<const bf16*>(p.up[e].data) : w0;  // the B tile's second half
  extern __shared__ __align__(16) uint8_t moe_mma_smem[];
  bf16* stage0 = reinterpret_cast<bf16*>(moe_mma_smem);
  __shared__ const bf16* arow[kMmaBM];
  tile_a_rows<kGateUp, kMmaBM>(arow, p, l, r0, rows);
  __syncthreads();
  const bool vec_a = a_rows_aligned<kGateUp>(p) && K % 8 == 0;
  const bool vec_b = K % 8 == 0 && reinterpret_cast<uintptr_t>(w0) % 16 == 0 && reinterpret_cast<uintptr_t>(w1) % 16 == 0;
  const int KT = static_cast<int>((K + kMmaBK - 1) / kMmaBK), a_rows = 16 * m_tiles;
  auto load_stage = [&](int st, int kt) {
    bf16* as = stage0 + st * kMmaStageElems;
    bf16* bs = as + kMmaBM * kMmaLd;
    const int64_t k0 = static_cast<int64_t>(kt) * kMmaBK;
    constexpr int kChunks = kMmaBK / 8;
    for (int idx = threadIdx.x; idx < a_rows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      load_chunk8(as + r * kMmaLd + c, arow[r] ? arow[r] + k0 + c : nullptr, K - k0 - c, vec_a, w0);
    }
    for (int idx = threadIdx.x; idx < kMmaBRows * kChunks; idx += kThreads) {
      const int sr = idx / kChunks, c = (idx % kChunks) * 8;
      const bf16* w = kGateUp && sr >= kBNo ? w1 : w0;
      const int64_t n = c0 + (kGateUp ? sr % kBNo : sr);
      load_chunk8(bs + sr * kMmaLd + c, n < N ? w + n * K + k0 + c : nullptr, K - k0 - c, vec_b, w0);
    }
  };
#pragma unroll
  for (int st = 0; st < kMmaStages - 1; ++st) {
    if (st < KT) load_stage(st, st);
    cp_async_commit();
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // acc[half][m16 tile][n8 block]: half 0/1 = the B tile's rows [0, 64) / [64, 128), of which
  // this warp's 16 are [warp * 16, warp * 16 + 16).
  float acc[2][kMmaBM / 16][2][4] = {};
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kMmaStages - 2>();
    __syncthreads();  // stage kt % kMmaStages has landed for every thread; the one loaded next is free
    if (kt + kMmaStages - 1 < KT) load_stage((kt + kMmaStages - 1) % kMmaStages, kt + kMmaStages - 1);
    cp_async_commit();
    const bf16* as = stage0 + (kt % kMmaStages) * kMmaStageElems;
    const bf16* bs = as + kMmaBM * kMmaLd;
#pragma unroll
    for (int kk = 0; kk < kMmaBK; kk += 16) {
      // B x4: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) of the warp's 16 rows.
      uint32_t bfr[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        ldmatrix_x4(bfr[h], bs + (h * 64 + warp * 16 + (lane & 7) + ((lane >> 4) << 3)) * kMmaLd + kk + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int i = 0; i < kMmaBM / 16; ++i) {
        if (i >= m_tiles) break;
        uint32_t a[4];
        ldmatrix_x4(a, as + (i * 16 + (lane & 15)) * kMmaLd + kk + (lane >> 4) * 8);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mma_bf16(acc[h][i][0], a, bfr[h][0], bfr[h][1]);
          mma_bf16(acc[h][i][1], a, bfr[h][2], bfr[h][3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  const int g = lane / 4, tq = lane % 4;
#pragma unroll
  for (int i = 0; i < kMmaBM / 16; ++i) {
    if (i >= m_tiles) break;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int r = i * 16 + g + (q >> 1) * 8;
        if (r >= rows) continue;
        const int64_t row = r0 + r, col = c0 + warp * 16 + j * 8 + 2 * tq + (q & 1);
        if constexpr (kGateUp) {
          const float gv = acc[0][i][j][q], uv = acc[1][i][j][q];
          if (col < N) l.h[row * p.inter + col] = __float2bfloat16(gv / (1.f + __expf(-gv)) * uv);
        } else {
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (col + h * 64 < N) l.y[row * p.hidden + col + h * 64] = acc[h][i][j][q];
        }
      }
  }
}

constexpr int kGemvRows = 4, kGemvWarps = 4, kGemvU = 4;

// GEMV form of moe_gemm_kernel for tiles of at most kGemvRows rows: block (tile, 4 output
// columns), one warp per column n, lanes split K in 8-wide chunks (a fixed order per row:
// lane-strided chunks, then a butterfly), kGemvU chunks of every weight row in flight.
template <bool kGateUp>
__global__ void __launch_bounds__(kGemvWarps * 32) moe_gemv_kernel(ops::MoeExpertsParams p, Layout l) {
  pdl_wait();
  const int tile = blockIdx.x;
  if (tile >= *l.n_tiles) return;
  const int lane = threadIdx.x & 31;
  const int64_t n = static_cast<int64_t>(blockIdx.y) * kGemvWarps + (threadIdx.x >> 5);
  const int64_t K = kGateUp ? p.hidden : p.inter, N = kGateUp ? p.inter : p.hidden;
  if (n >= N) return;
  const int e = l.tile_expert[tile], r0 = l.tile_row0[tile];
  const int rows = min(kGemvRows, l.offsets[e + 1] - r0);
  constexpr int kNB = kGateUp ? 2 : 1;
  const bf16* wrow[kNB];
  wrow[0] = static_cast<const bf16*>(kGateUp ? p.gate[e].data : p.down[e].data) + n * K;
  if constexpr (kGateUp) wrow[1] = static_cast<const bf16*>(p.up[e].data) + n * K;
  const bf16* arow[kGemvRows];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)  // past the tile's rows: a real row, computed and dropped
    arow[r] = a_row<kGateUp>(p, l, r0 + min(r, rows - 1));
  float acc[kNB][kGemvRows] = {};
  bool vec = K % 8 == 0 && a_rows_aligned<kGateUp>(p);
#pragma unroll
  for (int b = 0; b < kNB; ++b) vec = vec && reinterpret_cast<uintptr_t>(wrow[b]) % 16 == 0;
  if (vec) {
    const int64_t chunks = K / 8;
    for (int64_t base = lane; base < chunks; base += 32 * kGemvU) {
      uint4 wv[kGemvU][kNB];
#pragma unroll
      for (int u = 0; u < kGemvU; ++u) {
        const int64_t c = base + 32 * u;
#pragma unroll
        for (int b = 0; b < kNB; ++b) wv[u][b] = c < chunks ? load_stream16(wrow[b] + c * 8) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kGemvU; ++u) {
        const int64_t c = base + 32 * u;
        if (c >= chunks) break;
#pragma unroll
        for (int r = 0; r < kGemvRows; ++r) {
          if (r >= rows) break;
          const uint4 xv = *reinterpret_cast<const uint4*>(arow[r] + c * 8);
#pragma unroll
          for (int b = 0; b < kNB; ++b) acc[b][r] += dot_bf16x8(wv[u][b], xv);
        }
      }
    }
  } else {
    for (int64_t j = lane; j < K; j += 32)
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        if (r >= rows) break;
        const float xv = __bfloat162float(arow[r][j]);
#pragma unroll
        for (int b = 0; b < kNB; ++b) acc[b][r] += __bfloat162float(wrow[b][j]) * xv;
      }
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    if (r >= rows) break;
    float v[kNB];
#pragma unroll
    for (int b = 0; b < kNB; ++b) v[b] = warp_sum(acc[b][r]);
    if (lane != 0) continue;
    const int64_t row = r0 + r;
    if constexpr (kGateUp) {
      l.h[row * p.inter + n] = __float2bfloat16(v[0] / (1.f + __expf(-v[0])) * v[1]);
    } else {
      l.y[row * p.hidden + n] = v[0];
    }
  }
}

// grid (tokens, hidden / 256): one output element a thread. Pairs of another rank's experts
// (row -1) add nothing; the others in k order.
__global__ void moe_combine_kernel(ops::MoeExpertsParams p, Layout l) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int K = p.top_k;
  for (int64_t i = blockIdx.y * int64_t{blockDim.x} + threadIdx.x; i < p.hidden; i += int64_t{gridDim.y} * blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
      const int32_t r = l.row_of_pair[t * K + k];
      if (r >= 0) acc += p.topk_weight[t * K + k] * l.y[static_cast<int64_t>(r) * p.hidden + i];
    }
    bf16* o = static_cast<bf16*>(p.out) + t * p.ld_out + i;
    *o = __float2bfloat16(__bfloat162float(*o) + acc);
  }
}

// FRUGAL_MOE_PIPELINE=0: the synchronous load-then-compute loop, for A/B runs.
bool moe_pipeline() {
  static const bool on = [] {
    const char* e = std::getenv("FRUGAL_MOE_PIPELINE");
    return !(e && std::string_view(e) == "0");
  }();
  return on;
}

// -1: unset (read FRUGAL_MOE_MMA on first use), else a MoeMma. Process-wide; tests and
// benchmarks flip it between launches on one thread (set_moe_mma), nothing else writes it.
int g_moe_mma = -1;
// The same for FRUGAL_MOE_STREAM (a MoeStream).
int g_moe_stream = -1;
// The same for FRUGAL_MOE_TINY (pairs; 0: off).
int g_moe_tiny = -1;
int g_moe_tiny_early = -1;  // set_moe_tiny_early; -1: FRUGAL_MOE_TINY_EARLY

// The dynamic shared-memory limit, and all of the SM's L1 as shared memory (a hint: two blocks of
// kMmaSmem fit only in the largest carveout; the kernels' loads bypass L1 anyway).
template <auto Kernel>
cudaError_t raise_mma_smem_k() {
  static const cudaError_t e = [] {
    const cudaError_t r = raise_dynamic_smem_once<Kernel>(kMmaSmem);
    return r != cudaSuccess ? r : cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  }();
  return e;
}
// Whether the mma.sync kernels can run here (their shared memory is more than a block may have
// before sm_80; asked first so that no failing attribute call leaves an error behind), their
// attributes set once.
bool mma_available() {
  static const bool ok = [] {
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        static_cast<size_t>(optin) < kMmaSmem + kMmaBM * sizeof(void*))
      return false;
    return raise_mma_smem_k<moe_mma_kernel<true>>() == cudaSuccess && raise_mma_smem_k<moe_mma_kernel<false>>() == cudaSuccess;
  }();
  return ok;
}

// The mma.sync kernels over tiles of kMmaBM rows (the schedule of a permute with bm = kMmaBM).
cudaError_t launch_mma_gemms(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream) {
  const int64_t tiles = max_tiles(p, kMmaBM);
  const cudaError_t err = launch_kernel(moe_mma_kernel<true>,
                                        dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(ceil_div(p.inter, kMmaBN<true>))),
                                        kThreads, kMmaSmem, stream, p, l);
  if (err != cudaSuccess) return err;
  return launch_kernel(moe_mma_kernel<false>,
                       dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(ceil_div(p.hidden, kMmaBN<false>))),
                       kThreads, kMmaSmem, stream, p, l);
}

template <int BM>
cudaError_t launch_gemms(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream) {
  const int64_t tiles = max_tiles(p, BM);
  cudaError_t err = launch_kernel(moe_gemm_kernel<BM, true>,
                                  dim3(static_cast<unsigned>(tiles), static_cast<unsigned>((p.inter + kBN - 1) / kBN)),
                                  kThreads, 0, stream, p, l, moe_pipeline());
  if (err != cudaSuccess) return err;
  return launch_kernel(moe_gemm_kernel<BM, false>,
                       dim3(static_cast<unsigned>(tiles), static_cast<unsigned>((p.hidden + kBN - 1) / kBN)),
                       kThreads, 0, stream, p, l, moe_pipeline());
}

}  // namespace

MoeMma moe_mma() {
  if (g_moe_mma < 0) {
    const char* e = std::getenv("FRUGAL_MOE_MMA");
    const std::string_view v = e != nullptr ? e : "";
    // Off unless asked for: on the H200 the mma.sync kernels measured slower than the WMMA tiles
    // at every size (V2-Lite, 256 tokens x top-6: 706 against 609 us; 1000 x 128/128: 9,015
    // against 9,585 output tok/s; docs/perf/2026-12-03-session33.md).
    g_moe_mma = static_cast<int>(v == "1" || v == "decode" ? MoeMma::kDecode : v == "all" ? MoeMma::kAll : MoeMma::kOff);
  }
  return static_cast<MoeMma>(g_moe_mma);
}

void set_moe_mma(MoeMma m) { g_moe_mma = static_cast<int>(m); }

cudaError_t prepare_moe_experts() {
  (void)mma_available();
  return cudaGetLastError();
}

MoeStream moe_stream() {
  if (g_moe_stream < 0) {
    const char* e = std::getenv("FRUGAL_MOE_STREAM");
    const std::string_view v = e != nullptr ? e : "";
    g_moe_stream = static_cast<int>(v == "0" ? MoeStream::kOff : v == "all" ? MoeStream::kAll : MoeStream::kDecode);
  }
  return static_cast<MoeStream>(g_moe_stream);
}

void set_moe_stream(MoeStream s) { g_moe_stream = static_cast<int>(s); }

// 16 by the arithmetic (nothing measured yet): the tiny path saves the permute and combine
// launches and, with shared experts, their three (~6.6 + 4.9 + 2.7 us of kernels and two launch
// gaps a V2-Lite layer at batch 1, ncu), and reads an expert once per pair where the GEMV tiles
// read it once per expert. Two tokens of top_k distinct experts out of E share top_k^2 / E on
// average: at 16 pairs (2 x top-8 of 64) one, a V2-Lite expert's 17 MB (~4 us) read twice; at
// 24 (4 x top-6) 3.4 of them (~14 us), about what it saves.
int moe_tiny_pairs() {
  if (g_moe_tiny < 0) {
    const char* e = std::getenv("FRUGAL_MOE_TINY");
    g_moe_tiny = kMoeTinyPairs;
    if (e != nullptr && *e != '\0') {
      char* end = nullptr;
      const long v = std::strtol(e, &end, 10);
      if (end != e && *end == '\0' && v >= 0) g_moe_tiny = static_cast<int>(v < 1 << 20 ? v : 1 << 20);
    }
  }
  return g_moe_tiny;
}

void set_moe_tiny_pairs(int pairs) { g_moe_tiny = pairs; }

namespace {
int moe_tiny_early_level() {
  static const int env = [] {  // 0, 1 (unset or anything else) or 2
    const char* e = std::getenv("FRUGAL_MOE_TINY_EARLY");
    return e == nullptr ? 1 : std::strcmp(e, "0") == 0 ? 0 : std::strcmp(e, "2") == 0 ? 2 : 1;
  }();
  return g_moe_tiny_early >= 0 ? g_moe_tiny_early : env;
}
}  // namespace

bool moe_tiny_early() { return moe_tiny_early_level() > 0; }
bool moe_tiny_early_routed() { return moe_tiny_early_level() > 1; }

void set_moe_tiny_early(int level) { g_moe_tiny_early = level; }

// Up to moe_tiny_pairs() (token, expert) pairs, the tiny path (every pair counts, a rank's or
// not: its kernels' grids cover them all); above, by rows per expert on average, over the
// n_routed experts the router chooses from (a rank's own experts see pairs / n_routed rows each
// too, not pairs / n_experts):
//   <= 4 (decode of a few sequences): GEMVs over 4-row tiles (the streaming kernels with
//        FRUGAL_MOE_STREAM=all);
//   (4, 64] (decode of many sequences): the streaming kernels over 64-row tiles, each expert's
//        weights read once for up to 64 rows (the mma.sync kernels where asked for with
//        FRUGAL_MOE_MMA=1 or all: an explicit ask wins; FRUGAL_MOE_STREAM=0: the WMMA tiles);
//   > 64 (prefill): WMMA tiles of 64 rows (16 below 48 rows when the decode range falls through
//        to them), or the mma.sync or streaming kernels where asked for at every size (all).
MoePath moe_experts_path(const ops::MoeExpertsParams& p) {
  const int64_t pairs = p.n_tokens * p.top_k, R = p.routed();
  const MoeStream stream = moe_stream();
  const MoeMma mma = moe_mma();
  const bool decode = pairs <= 64 * R;
  if (pairs <= moe_tiny_pairs()) return MoePath::kTiny;
  if (pairs <= 4 * R) return stream == MoeStream::kAll ? MoePath::kStream : MoePath::kGemv;
  if ((mma == MoeMma::kAll || (mma == MoeMma::kDecode && decode)) && mma_available()) return MoePath::kMma;
  if (stream == MoeStream::kAll || (stream == MoeStream::kDecode && decode)) return MoePath::kStream;
  return pairs >= 48 * R ? MoePath::kWmma64 : MoePath::kWmma16;
}

const char* moe_path_name(MoePath path) {
  switch (path) {
    case MoePath::kTiny: return "tiny";
    case MoePath::kGemv: return "gemv";
    case MoePath::kStream: return "stream";
    case MoePath::kMma: return "mma.sync";
    case MoePath::kWmma16: return "wmma16";
    case MoePath::kWmma64: return "wmma64";
  }
  return "?";
}

bool moe_experts_fuses_shared(const ops::MoeExpertsParams& p) {
  return moe_experts_path(p) == MoePath::kTiny && moe_tiny_fuses_shared(p);
}

cudaError_t launch_moe_experts(const ops::MoeExpertsParams& p, cudaStream_t stream) {
  if (p.n_tokens == 0) return cudaSuccess;
  const Layout l = layout_of(p);
  const MoePath path = moe_experts_path(p);
  if (path == MoePath::kTiny) return launch_tiny(p, l, stream);
  int bm = 0;
  switch (path) {
    case MoePath::kTiny: break;
    case MoePath::kGemv: bm = kGemvRows; break;
    case MoePath::kStream: bm = kStreamBM; break;
    case MoePath::kMma: bm = kMmaBM; break;
    case MoePath::kWmma16: bm = 16; break;
    case MoePath::kWmma64: bm = 64; break;
  }
  cudaError_t err = launch_kernel(moe_permute_kernel, 1, 1024, 0, stream, p, l, bm);
  if (err != cudaSuccess) return err;
  switch (path) {
    case MoePath::kTiny: break;
    case MoePath::kGemv: {
      const unsigned tiles = static_cast<unsigned>(max_tiles(p, bm));
      err = launch_kernel(moe_gemv_kernel<true>, dim3(tiles, static_cast<unsigned>(ceil_div(p.inter, kGemvWarps))),
                          kGemvWarps * 32, 0, stream, p, l);
      if (err == cudaSuccess)
        err = launch_kernel(moe_gemv_kernel<false>, dim3(tiles, static_cast<unsigned>(ceil_div(p.hidden, kGemvWarps))),
                            kGemvWarps * 32, 0, stream, p, l);
      break;
    }
    case MoePath::kStream: err = launch_stream_gemms(p, l, stream); break;
    case MoePath::kMma: err = launch_mma_gemms(p, l, stream); break;
    case MoePath::kWmma16: err = launch_gemms<16>(p, l, stream); break;
    case MoePath::kWmma64: err = launch_gemms<64>(p, l, stream); break;
  }
  if (err != cudaSuccess) return err;
  const int64_t col_blocks = (p.hidden + 255) / 256;
  return launch_kernel(moe_combine_kernel, dim3(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(col_blocks < 65535 ? col_blocks : 65535)),
                       256, 0, stream, p, l);
}

}  // namespace frugal::cuda
