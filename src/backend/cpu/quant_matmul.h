// Quantized matmul on the CPU: y[m, n] = x[m, k] @ W^T (+ bias) (+ y) for a quant::QuantWeight
// (INT8 per channel, INT4 group-wise from AWQ/GPTQ with zero points and act order, FP8 E4M3 with
// tensor/channel/block scales, NF4). Activations and output f32 (the CPU backend's activation
// dtype). m <= kGemvMaxTokens streams the codes once (GEMV, bandwidth bound); larger m runs an
// integer GEMM on int8 activations for INT8 / AWQ-GPTQ INT4 where the ISA has one (AVX-512
// VNNI, AVX2), else dequantizes 64-row blocks to f32 and runs the dense packed GEMM on them.
//
// The CPU backend's matmul calls quant_matmul_view for the int8, int4, nf4 and fp8 weight
// schemes (ops/weight_format.h); see docs/quantization.md.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels_quant.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "ops/quant/quant_weight.h"

namespace frugal::cpu {

struct QuantMatmulRequest {
  const float* x = nullptr;   // [m][ld_x], ld_x >= k
  int64_t ld_x = 0;
  const quant::QuantWeight* w = nullptr;
  const float* bias = nullptr;  // [n] or null
  float* y = nullptr;         // [m][ld_y], ld_y >= n
  int64_t ld_y = 0;
  int64_t m = 0;
  bool accumulate = false;
  // INT8 / INT4 weights may round x to int8 per 32-block for integer dot products where the
  // CPU has them (decode: AVX-512 VNNI; prefill, m > 8: AVX-512 VNNI and AVX2); true keeps x
  // in f32.
  bool exact_activations = false;
};

// The best quant kernel table this CPU runs, capped by FRUGAL_ISA like the dense kernels.
const QuantKernelTable& best_quant_kernels();
// "avx512_vnni" / "avx512" / "avx2" / "scalar"; error if unknown or not supported by this CPU.
Result<const QuantKernelTable*> quant_kernels_for(const char* isa);

Status quant_matmul(ThreadPool& pool, const QuantMatmulRequest& r);
Status quant_matmul(ThreadPool& pool, const QuantMatmulRequest& r, const QuantKernelTable& kernels);
// The same on a kernel view (r.w is ignored): the CPU backend's matmul for quantized WeightViews
// (quant::kernel_view). `name` prefixes errors.
Status quant_matmul_view(ThreadPool& pool, const QuantMatmulRequest& r, const quant::QuantWeightView& w,
                         const char* name, const QuantKernelTable& kernels);

}  // namespace frugal::cpu
