// The routed experts' scratch layout and tile rows (moe_experts.cu's permute and GEMMs, the
// streaming GEMMs of moe_stream.cu). Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "ops/params.h"

namespace frugal::cuda::moe {

using bf16 = __nv_bfloat16;

// ops::moe_experts_scratch_bytes's bytes as the kernels use them.
struct Layout {
  int32_t* row_of_pair;  // [pairs] row in the expert-sorted order, -1 for another rank's expert
  int32_t* pair_at;      // [pairs] (the first local-pair-count entries are used)
  int32_t* tile_expert;  // [max_tiles]
  int32_t* tile_row0;    // [max_tiles]
  int32_t* offsets;      // [E + 1]
  int32_t* n_tiles;      // [1]
  bf16* h;               // [pairs, inter]
  float* y;              // [pairs, hidden]; the tiny path's shared h [n_tokens, shared_inter] bf16
};

inline int64_t align_up(int64_t b) { return (b + 255) / 256 * 256; }

inline Layout layout_of(const ops::MoeExpertsParams& p) {
  const int64_t pairs = p.n_tokens * p.top_k;
  auto* base = static_cast<uint8_t*>(p.scratch);
  auto* i = reinterpret_cast<int32_t*>(base);
  Layout l;
  l.row_of_pair = i;
  l.pair_at = i + pairs;
  l.tile_expert = i + 2 * pairs;
  l.tile_row0 = l.tile_expert + pairs + p.n_experts;
  l.offsets = l.tile_row0 + pairs + p.n_experts;
  l.n_tiles = l.offsets + p.n_experts + 1;
  const int64_t ints = align_up(4 * (2 * pairs + 2 * (pairs + p.n_experts) + 2 * (p.n_experts + 1) + 4));
  l.h = reinterpret_cast<bf16*>(base + ints);
  l.y = reinterpret_cast<float*>(base + ops::moe_experts_shared_scratch_offset(p.n_tokens, p.top_k, p.n_experts, p.inter));
  return l;
}

// The local expert of pair i, or -1 where topk_idx[i] is another rank's (or out of range; the
// unsigned difference keeps any id, negative or huge, from overflowing into range).
__device__ __forceinline__ int local_expert(const ops::MoeExpertsParams& p, int64_t i) {
  const uint32_t e = static_cast<uint32_t>(p.topk_idx[i]) - static_cast<uint32_t>(p.first_expert);
  return e < static_cast<uint32_t>(p.n_experts) ? static_cast<int>(e) : -1;
}

using cuda::dot_bf16x8;  // common.cuh (moe::dot_bf16x8 in moe.cu)

// The most tiles a permute with tiles of bm rows lays out: ceil(pairs / bm) full ones plus one
// partial tile per expert that has rows.
inline int64_t max_tiles(const ops::MoeExpertsParams& p, int bm) {
  const int64_t pairs = p.n_tokens * p.top_k;
  return (pairs + bm - 1) / bm + (pairs < p.n_experts ? pairs : p.n_experts);
}

// Row `row` of the expert-sorted order as a GEMM's A row (its K values): x gathered by the
// pair's token (gate_up) or h (down).
template <bool kGateUp>
__device__ __forceinline__ const bf16* a_row(const ops::MoeExpertsParams& p, const Layout& l, int64_t row) {
  return kGateUp ? static_cast<const bf16*>(p.x) + static_cast<int64_t>(l.pair_at[row] / p.top_k) * p.ld_x
                 : l.h + row * p.inter;
}
// Whether A rows are 16-byte aligned (with K % 8 == 0, 16-byte loads throughout).
template <bool kGateUp>
__device__ __forceinline__ bool a_rows_aligned(const ops::MoeExpertsParams& p) {
  return kGateUp ? p.ld_x % 8 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 : p.inter % 8 == 0;
}
// A tile's A row starts in shared memory (nullptr past its rows), for the block's loads.
template <bool kGateUp, int BM>
__device__ __forceinline__ void tile_a_rows(const bf16** arow, const ops::MoeExpertsParams& p, const Layout& l, int r0, int rows) {
  for (int r = threadIdx.x; r < BM; r += blockDim.x) arow[r] = r < rows ? a_row<kGateUp>(p, l, r0 + r) : nullptr;
}

// The tiny path (moe_tiny.cu): gate_up then down + combine, no permutation, with the shared
// experts when p.has_shared() (then dense bf16: moe_tiny_fuses_shared).
bool moe_tiny_fuses_shared(const ops::MoeExpertsParams& p);
cudaError_t launch_tiny(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream);

// The streaming GEMMs (moe_stream.cu) over the tiles of a permute with bm = kStreamBM: gate_up
// into l.h, then down into l.y, with moe_stream_u() quads a warp an iteration (kernels.h).
constexpr int kStreamBM = 64;
cudaError_t launch_stream_gemms(const ops::MoeExpertsParams& p, const Layout& l, cudaStream_t stream);

}  // namespace frugal::cuda::moe
