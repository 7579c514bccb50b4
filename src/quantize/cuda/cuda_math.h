// The CUDA QuantMath (quantize/math.h) for frugal quantize --device cuda: the calibration
// forward's linears and AWQ's search as cuBLAS f32 GEMMs, GPTQ's Hessians (f64 GEMM), damped
// Cholesky inverse (cuSOLVER potrf/potri/potrf, f64) and lazy block updates (f32 GEMM on the
// weight kept on the GPU), AWQ fake quantization and clipping as kernels. Results equal
// host_math()'s within float rounding (tests/cuda/cuda_quantize_test.cpp).
#pragma once

#include <memory>

#include "core/status.h"
#include "quantize/math.h"

namespace frugal::quantize {

// Whether a CUDA device can be used (driver and at least one GPU).
bool cuda_quant_device_available();
// The CUDA implementation on GPU `device`; an error names why none can be made.
Result<std::unique_ptr<QuantMath>> make_cuda_quant_math(int device = 0);

}  // namespace frugal::quantize
