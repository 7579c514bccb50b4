// The heavy linear algebra of frugal quantize behind one interface, so the calibration forward
// and the methods (quantize/host_layer, quantize/methods) run unchanged on the host (threaded
// f32/f64 loops, `host_math()`) or on a GPU (quantize/cuda: cuBLAS, cuSOLVER and a few kernels,
// linked by the CLI in CUDA builds). The algorithms stay in methods.cpp; an implementation only
// computes these primitives, and both give the same results within float rounding
// (tests/cuda/cuda_quantize_test.cpp compares them).
//
//   QuantMath& m = host_math();
//   m.linear(x, t, w, b, out, in, y);          // y = x w^T + b
//   std::vector<double> h = m.hessian(x, n, k); // 2/n X^T X
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace frugal::quantize {

struct IntSpec;

// GPTQ's weight in quantization order, wp [in, out] (row j is input column perm[j]), held by
// the implementation (host memory or the GPU) while the column loop runs.
class GptqWork {
 public:
  virtual ~GptqWork() = default;
  // Copies rows [r0, r1) of the current wp into dst [r1 - r0, out].
  virtual void rows(int64_t r0, int64_t r1, float* dst) = 0;
  // Lazy block update: wp[i2:in, :] -= L2[i2:in, i1:i2] . err, err [i2 - i1, out] (f32).
  virtual void update(int64_t i1, int64_t i2, const float* err) = 0;
};

class QuantMath {
 public:
  virtual ~QuantMath() = default;
  virtual std::string name() const = 0;
  // The first failure of an implementation that can fail (a device error); the primitives
  // return zeros after one, and quantize_model checks this after every layer.
  virtual Status status() const { return {}; }

  // y [t, out] = x [t, in] . w^T + b (w row-major [out, in]; b [out] or null).
  virtual void linear(const float* x, int64_t t, const float* w, const float* b, int64_t out, int64_t in, float* y) = 0;

  // H = 2/n X^T X of x [n, k] (row-major), k x k, double, symmetric.
  virtual std::vector<double> hessian(const float* x, int64_t n, int64_t k) = 0;

  // a [k, k] symmetric positive definite (row-major, double) -> the lower L2 with
  // L2 L2^T = a^-1 (upper triangle zero). 0: done; 1: a is not positive definite; 2: a^-1 is not.
  virtual int inverse_cholesky(std::vector<double>& a, int64_t k) = 0;

  // Starts GPTQ's column loop on wp [in, out] with the lower factor l2 [in, in] (double).
  virtual std::unique_ptr<GptqWork> gptq_begin(std::vector<float> wp, const std::vector<double>& l2, int64_t in,
                                               int64_t out) = 0;

  // AWQ's search loss for each candidate scale vector s (scales[c] has `in` values):
  // sum over the weights w_i [outs[i], in] of |xs w_i^T - xs (Q(w_i diag(s)) diag(1/s))^T|^2, on
  // xs [ns, in], Q = RTN with spec (per group of the scaled weight).
  virtual std::vector<double> awq_losses(const std::vector<const float*>& ws, const std::vector<int64_t>& outs, int64_t in,
                                         const float* xs, int64_t ns, const std::vector<std::vector<float>>& scales,
                                         const IntSpec& spec) = 0;

  // AWQ's clipping search on w [out, in] (in place), inputs xs [ns, in]: per row and group, the
  // clamp max|w| (1 - i/20), i < 10, minimising |xs_g (w_g - Q(clamp(w_g)))|^2; clamps w.
  virtual void awq_clip(float* w, int64_t out, int64_t in, const float* xs, int64_t ns, const IntSpec& spec) = 0;
};

// The host implementation (the process thread pool). Thread-safe to share.
QuantMath& host_math();

}  // namespace frugal::quantize
