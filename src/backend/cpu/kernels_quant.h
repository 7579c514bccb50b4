// The CPU quantized-matmul kernels of one instruction set (see quant_matmul.h for the entry
// point). Like kernels.h: plain functions over row ranges, one translation unit per ISA built
// from kernels_quant_impl.h, only POD types crossing the boundary.
#pragma once

#include <cstdint>

#include "ops/quant/quant_view.h"

namespace frugal::cpu {

// y[m, n] = x[m, k] @ W^T (+ bias) (+ y). x was prepared by the dispatcher: permuted into the
// weight's internal input order and zero-padded to k_pad columns.
struct QuantMatmulArgs {
  const float* x;      // [m][ld_x], ld_x >= k_pad, columns k..k_pad zero
  int64_t ld_x;
  const float* xsum;   // [m][n_groups] sums of x per scale group; needed when w.offset is set
  const float* bias;   // [n] f32 or null
  float* y;            // [m][ld_y]
  int64_t ld_y;
  int64_t m;
  bool accumulate;
  quant::QuantWeightView w;
  // For gemv_i8 only: x quantized to int8 per 32-column block (|q| <= 127), zero-padded to a
  // multiple of 64 columns, and the block scales laid out per pair of blocks as 16 floats
  // (8 x scale of block 2t, then 8 x scale of block 2t + 1): x ~= xq * scale.
  const int8_t* xq;
  int64_t ld_xq;
  const float* xd16;   // [m][ld_xd16]
  int64_t ld_xd16;
};

struct QuantKernelTable {
  const char* isa;
  // Rows [n0, n1) of y for all m tokens (meant for m <= kGemvMaxTokens).
  void (*gemv)(const QuantMatmulArgs& a, int64_t n0, int64_t n1);
  // out[r - r0][0:k_pad] = dequantized internal row r (scale and offset applied), r in [r0, r1).
  void (*dequant_rows)(const quant::QuantWeightView& w, int64_t r0, int64_t r1, float* out);
  // Null, or GEMV on int8 activations with integer dot products (AVX-512 VNNI) for kQ8 and
  // identity-coded kQ4 weights; needs QuantMatmulArgs::xq / xd16. Error: x is rounded to int8
  // per 32-block, |dx| <= amax(block) / 254 per element.
  void (*gemv_i8)(const QuantMatmulArgs& a, int64_t n0, int64_t n1);
};

const QuantKernelTable& scalar_quant_kernels();
const QuantKernelTable& avx2_quant_kernels();
const QuantKernelTable& avx512_quant_kernels();
const QuantKernelTable& avx512_vnni_quant_kernels();  // avx512 + gemv_i8

}  // namespace frugal::cpu
