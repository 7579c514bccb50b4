// The split GEMMs' epilogues (kernels.h): the op after a matmul whose k slices left f32 partials
// [splits][m][n] (quant_gemm_reduce's input) makes the matmul's outputs from them itself: the
// slices added in slice order, then the bias, then y itself when accumulating, rounded to bf16
// (y_dtype), as quant_gemm_reduce's store_y computes them, bit for bit.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "ops/params.h"

namespace frugal::cuda {

struct SplitY {
  ops::MatmulParams mm;
  const float* partials;
  int splits;
};

// The bias, y when accumulating, the bf16 rounding: store_y's tail for output (tok, row).
__device__ __forceinline__ float split_finish(const SplitY& s, int64_t tok, int64_t row, float v) {
  if (s.mm.bias) v += load_f(s.mm.bias_dtype, s.mm.bias, row);
  if (s.mm.accumulate) v += load_f(s.mm.y_dtype, s.mm.y, tok * s.mm.ld_y + row);
  return round_to(DType::kBF16, v);
}

// Outputs row..row + 7 of token tok (n % 8 == 0, row % 8 == 0, partials 16-byte aligned).
__device__ __forceinline__ void split_y8(const SplitY& s, int64_t tok, int64_t row, float v[8]) {
  const int64_t total = s.mm.m * s.mm.n, at = tok * s.mm.n + row;
  const float4* p0 = reinterpret_cast<const float4*>(s.partials + at);
  float4 a = __ldcs(p0), b = __ldcs(p0 + 1);
  for (int z = 1; z < s.splits; ++z) {
    const float4* pz = reinterpret_cast<const float4*>(s.partials + static_cast<int64_t>(z) * total + at);
    const float4 c = __ldcs(pz), d = __ldcs(pz + 1);
    a.x += c.x, a.y += c.y, a.z += c.z, a.w += c.w;
    b.x += d.x, b.y += d.y, b.z += d.z, b.w += d.w;
  }
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = split_finish(s, tok, row + e, v[e]);
}

// Outputs row, row + 1 of token tok (n and row even, partials 8-byte aligned).
__device__ __forceinline__ float2 split_y2(const SplitY& s, int64_t tok, int64_t row) {
  const int64_t total = s.mm.m * s.mm.n, at = tok * s.mm.n + row;
  float2 a = __ldcs(reinterpret_cast<const float2*>(s.partials + at));
  for (int z = 1; z < s.splits; ++z) {
    const float2 c = __ldcs(reinterpret_cast<const float2*>(s.partials + static_cast<int64_t>(z) * total + at));
    a.x += c.x, a.y += c.y;
  }
  return make_float2(split_finish(s, tok, row, a.x), split_finish(s, tok, row + 1, a.y));
}

}  // namespace frugal::cuda
