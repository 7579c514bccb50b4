// The prefill kernels' block -> (sequence, query tile) map (attention_prefill.cu,
// attention_prefill_fa3.cu): one block per kTileQ-query tile; sequences' tiles are numbered in
// order and, within a sequence, taken last-first so the long causal rows start early.
#pragma once

#include "backend/cuda/common.cuh"
#include "ops/params.h"

namespace frugal::cuda {

// Thread 0 walks the sequences; the block's __syncthreads publishes the result (and anything
// the block wrote to shared memory before it). False for a block past the last tile (the grid
// is an upper bound).
template <int kTileQ>
__device__ bool find_query_tile(const ops::AttentionParams& p, int* seq, int* tile) {
  __shared__ int s_seq, s_tile;
  if (threadIdx.x == 0) {
    s_seq = -1;
    int b = blockIdx.x;
    for (int s = 0; s < p.n_seqs; ++s) {
      const int n_tiles = (p.q_start[s + 1] - p.q_start[s] + kTileQ - 1) / kTileQ;
      if (b < n_tiles) {
        s_seq = s;
        s_tile = n_tiles - 1 - b;
        break;
      }
      b -= n_tiles;
    }
  }
  __syncthreads();
  *seq = s_seq;
  *tile = s_tile;
  return s_seq >= 0;
}

}  // namespace frugal::cuda
