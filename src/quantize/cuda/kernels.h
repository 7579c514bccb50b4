// Kernels of the CUDA QuantMath (cuda_math.cpp). Plain launchers so the C++20 side needs no nvcc.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace frugal::quantize::cuda {

void launch_f32_to_f64(const float* x, double* y, int64_t n, cudaStream_t s);
void launch_f64_to_f32(const double* x, float* y, int64_t n, cudaStream_t s);
// GPTQ's prepared Hessian: hp[a, b] = h[perm[a], perm[b]] (k x k), diagonal (dead[a] ? 1 :
// value) + damp.
void launch_gptq_permute_damp(const double* h, double* hp, const int64_t* perm, const uint8_t* dead, double damp, int64_t k,
                              cudaStream_t s);
// out[r, j] = Q(w[r, j] * sc[j]) / sc[j], Q = AutoAWQ's asymmetric RTN per group of the scaled
// row (f16-rounded scale, zero = clamp(-round(min / scale), 0, maxq)).
void launch_awq_fake_quant(const float* w, const float* sc, float* out, int64_t rows, int64_t in, int64_t group,
                           int32_t maxq, cudaStream_t s);
// *acc += sum (a[i] - b[i])^2 (double).
void launch_sq_diff_sum(const float* a, const float* b, int64_t n, double* acc, cudaStream_t s);
// AutoAWQ's clipping search in place on w [out, in] with inputs xs [ns, in] (ns <= 1024), the
// AWQ scheme; group <= 4096.
void launch_awq_clip(float* w, int64_t out, int64_t in, int64_t group, int32_t maxq, const float* xs, int64_t ns,
                     cudaStream_t s);

}  // namespace frugal::quantize::cuda
