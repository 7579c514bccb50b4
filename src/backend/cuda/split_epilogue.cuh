// The split GEMMs' epilogues (kernels.h): the op after a matmul whose k slices left f32 partials
// [splits][m][n] (quant_gemm_reduce's input) makes the matmul's outputs from them itself: the
// slices added in slice order, then the bias, then y itself when accumulating, rounded to bf16
// (y_dtype), as quant_gemm_reduce's store_y computes them, bit for bit.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/common.cuh"
#include "ops/params.h"

namespace frugal::cuda {

struct SplitY {
  ops::MatmulParams mm;
  const float* partials;
  int splits;
  int batch;  // slices whose loads are in flight together (1..kSplitBatchMax; make_split_y)
};

// A kernel with and without a split epilogue takes SplitArg<kSplit>: the plain one an empty
// NoSplit, so its launches carry no SplitY (~200 bytes of parameters) it never reads.
struct NoSplit {};
template <bool kSplit>
using SplitArg = std::conditional_t<kSplit, SplitY, NoSplit>;

// The slices' loads are issued `batch` at a time, slice 0 with the first, before any of them is
// added (still added in slice order): a thread's loads in flight together, not one round trip a
// slice. The consumers run far fewer threads than the reduce kernel's grid (split_rms_norm: one
// block a token), so a chain of one load a slice measured slower than the reduce kernel it
// replaced (session 52, run 2); batches of 4 after slice 0 gained 1.6% (session 52, run 3).
// The slab GEMM leaves 4-17 slices at 16-64 tokens on the 7B (session 53).
constexpr int kSplitBatchMax = 8;
int split_load_batch();  // FRUGAL_SPLIT_BATCH (1..8), else 8
inline SplitY make_split_y(const ops::MatmulParams& mm, const float* partials, int splits) {
  return SplitY{mm, partials, splits, split_load_batch()};
}

// The bias, y when accumulating, the bf16 rounding: store_y's tail for output (tok, row).
__device__ __forceinline__ float split_finish(const SplitY& s, int64_t tok, int64_t row, float v) {
  if (s.mm.bias) v += load_f(s.mm.bias_dtype, s.mm.bias, row);
  if (s.mm.accumulate) v += load_f(s.mm.y_dtype, s.mm.y, tok * s.mm.ld_y + row);
  return round_to(DType::kBF16, v);
}

// Outputs row..row + 7 of token tok (n % 8 == 0, row % 8 == 0, partials 16-byte aligned).
__device__ __forceinline__ void split_y8(const SplitY& s, int64_t tok, int64_t row, float v[8]) {
  const int64_t total = s.mm.m * s.mm.n, at = tok * s.mm.n + row;
  float4 a, b;
  for (int z0 = 0; z0 < s.splits; z0 += s.batch) {
    float4 c[kSplitBatchMax], d[kSplitBatchMax];
#pragma unroll
    for (int j = 0; j < kSplitBatchMax; ++j)
      if (j < s.batch && z0 + j < s.splits) {
        const float4* pz = reinterpret_cast<const float4*>(s.partials + static_cast<int64_t>(z0 + j) * total + at);
        c[j] = __ldcs(pz);
        d[j] = __ldcs(pz + 1);
      }
#pragma unroll
    for (int j = 0; j < kSplitBatchMax; ++j)
      if (j < s.batch && z0 + j < s.splits) {
        if (z0 + j == 0) {
          a = c[j], b = d[j];
        } else {
          a.x += c[j].x, a.y += c[j].y, a.z += c[j].z, a.w += c[j].w;
          b.x += d[j].x, b.y += d[j].y, b.z += d[j].z, b.w += d[j].w;
        }
      }
  }
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = split_finish(s, tok, row + e, v[e]);
}

// Outputs row, row + 1 of token tok (n and row even, partials 8-byte aligned).
__device__ __forceinline__ float2 split_y2(const SplitY& s, int64_t tok, int64_t row) {
  const int64_t total = s.mm.m * s.mm.n, at = tok * s.mm.n + row;
  float2 a;
  for (int z0 = 0; z0 < s.splits; z0 += s.batch) {
    float2 c[kSplitBatchMax];
#pragma unroll
    for (int j = 0; j < kSplitBatchMax; ++j)
      if (j < s.batch && z0 + j < s.splits)
        c[j] = __ldcs(reinterpret_cast<const float2*>(s.partials + static_cast<int64_t>(z0 + j) * total + at));
#pragma unroll
    for (int j = 0; j < kSplitBatchMax; ++j)
      if (j < s.batch && z0 + j < s.splits) {
        if (z0 + j == 0) a = c[j];
        else a.x += c[j].x, a.y += c[j].y;
      }
  }
  return make_float2(split_finish(s, tok, row, a.x), split_finish(s, tok, row + 1, a.y));
}

}  // namespace frugal::cuda
