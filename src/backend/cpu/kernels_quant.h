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
                       // (with int8 x: sums of the rounded x, d * sum(xq) per block)
  const float* bias;   // [n] f32 or null
  float* y;            // [m][ld_y]
  int64_t ld_y;
  int64_t m;
  bool accumulate;
  quant::QuantWeightView w;
  // For gemv_i8 only: x quantized to int8 per 32-column block (|q| <= 127), zero-padded to a
  // multiple of 64 columns, x ~= xq * scale. kQ8 weights: x in order, the block scales laid out
  // per pair of blocks as 16 floats (8 x scale of block 2t, then 8 x scale of block 2t + 1).
  // kQ4 weights: each whole quad of blocks (4q .. 4q + 3) in the codes' nibble order, 128 bytes
  // (B0 x0-15, B1 x0-15, B2 x0-15, B3 x0-15, then x16-31 of each), its scales 16 floats (4 x
  // each block's); the last 1-3 blocks stay in order. xd [m][ld_xd]: every block's scale.
  const int8_t* xq;
  int64_t ld_xq;
  const float* xd16;   // [m][ld_xd16]
  int64_t ld_xd16;
  // For gemm_i8 (m a multiple of QuantKernelTable::gemm_i8_mr; padding rows all zero):
  // x quantized per 32-column block by quantize_x, row-major [m][ld_xq] int8 in xq; block scales
  // xd [m][ld_xd] (x ~= xq * xd); xc [m][ld_xd] = -128 * sum of the block's codes (the
  // correction for VNNI's unsigned operand when int8 weights are stored biased by 128).
  const float* xd = nullptr;
  const int32_t* xc = nullptr;
  int64_t ld_xd = 0;
};

// Bytes of per-thread scratch gemm_i8 needs for one panel of `panel` weight rows (packed codes,
// scales, offsets), 64-byte alignable.
inline int64_t gemm_i8_scratch_bytes(int64_t panel, int64_t k_pad, int64_t n_groups) {
  return panel * k_pad + 2 * panel * n_groups * static_cast<int64_t>(sizeof(float)) + 256;
}

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
  // Null, or GEMM (prefill) on int8 activations with integer dot products (AVX-512 VNNI
  // vpdpbusd; AVX2 vpmaddubsw + vpmaddwd) for kQ8 and identity-coded kQ4 weights: weight panels
  // [p0, p1) of gemm_i8_panel rows each are unpacked to bytes in dot-product order in `scratch`
  // (gemm_i8_scratch_bytes) and reused by all m tokens, gemm_i8_mr tokens per register tile.
  // Integer sums per 32-block are exact; each block's sum is scaled by x's block scale and
  // the weight's group scale in f32. Needs xq / xd / xc from quantize_x (and xsum of the rounded x with offsets).
  void (*gemm_i8)(const QuantMatmulArgs& a, int64_t p0, int64_t p1, uint8_t* scratch);
  int gemm_i8_panel;
  int gemm_i8_mr;
  // One row of x for gemm_i8: x[0:k_pad] (zero past k) -> xq, xd, xc per 32-block (symmetric
  // int8, d = amax / 127, q = round-to-nearest-even(x * 127 / amax), as gemv_i8's).
  void (*quantize_x)(const float* x, int64_t k_pad, int8_t* xq, float* xd, int32_t* xc);
};

const QuantKernelTable& scalar_quant_kernels();
const QuantKernelTable& avx2_quant_kernels();
const QuantKernelTable& avx512_quant_kernels();
const QuantKernelTable& avx512_vnni_quant_kernels();  // avx512 + gemv_i8

}  // namespace frugal::cpu
