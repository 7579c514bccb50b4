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
};

struct QuantKernelTable {
  const char* isa;
  // Rows [n0, n1) of y for all m tokens (meant for m <= kGemvMaxTokens).
  void (*gemv)(const QuantMatmulArgs& a, int64_t n0, int64_t n1);
  // out[r - r0][0:k_pad] = dequantized internal row r (scale and offset applied), r in [r0, r1).
  void (*dequant_rows)(const quant::QuantWeightView& w, int64_t r0, int64_t r1, float* out);
};

const QuantKernelTable& scalar_quant_kernels();
const QuantKernelTable& avx2_quant_kernels();
const QuantKernelTable& avx512_quant_kernels();

}  // namespace frugal::cpu
