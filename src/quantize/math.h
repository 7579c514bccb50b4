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

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace frugal::quantize {

struct IntSpec;

// GPTQ's factor L2 [in, in] (lower, L2 L2^T = H'^-1 in quantization order) where the
// implementation keeps it: host memory, or the GPU (only its diagonal blocks come to the host).
class GptqL2 {
 public:
  virtual ~GptqL2() = default;
};
// The host's: the whole matrix, row-major, upper triangle zero.
struct HostGptqL2 final : GptqL2 {
  std::vector<double> l2;
};

// The part of GPTQ that depends on H only, shared by the linears that read one input: column
// order, dead inputs, and the factor, of which the column loop reads the diagonal blocks.
struct GptqFactor {
  int64_t in = 0;
  int64_t block = 128;        // the column loop's block size (diag's blocks)
  std::vector<int64_t> perm;  // [in] quantization order (identity without act_order)
  std::vector<uint8_t> dead;  // [in] by position in perm: H_jj == 0, weights zeroed
  std::vector<double> diag;   // L2[i1:i2, i1:i2] for i1 = 0, block, ..., row-major, upper zero
  std::shared_ptr<GptqL2> l2; // the whole factor, for the implementation's GptqWork::update
  // U[i][j] = L2[j][i] for positions i, j of one block.
  double u(int64_t i, int64_t j) const {
    const int64_t b0 = i / block * block, sz = std::min(block, in - b0);
    return diag[static_cast<size_t>(b0 * block + (j - b0) * sz + (i - b0))];
  }
};

// The order, dead inputs and damping of GPTQ from diag(H): perm sorts by decreasing diagonal
// (stable) with act_order, else identity; dead[j] = diag[perm[j]] == 0; the damping added to
// every diagonal is damp_percent times the mean diagonal with dead ones counted as 1.
void gptq_order(const std::vector<double>& diag, bool act_order, double damp_percent, std::vector<int64_t>* perm,
                std::vector<uint8_t>* dead, double* damp);
// The diagonal blocks of a row-major lower l2 [in, in] (GptqFactor::diag's layout).
std::vector<double> gptq_diag_blocks(const double* l2, int64_t in, int64_t block);
// The host factor of f (an implementation bug, never bad input, if f is another's: aborts).
std::shared_ptr<HostGptqL2> host_l2(const GptqFactor& f);

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

  // GPTQ's factor from H (k x k, row-major; methods.h's gptq_factor): order and dead inputs by
  // gptq_order, H' = P H P^T with dead diagonals set to 1 plus the damping, L2 the lower
  // Cholesky factor of H'^-1, diag blocks of size `block`. Returns 0, or inverse_cholesky's 1 / 2.
  // The default works on the host (hessian, inverse_cholesky, a HostGptqL2).
  virtual int gptq_factor_from_hessian(std::vector<double> h, int64_t k, double damp_percent, bool act_order,
                                       int64_t block, GptqFactor* f);
  // The same from the inputs x [n, k]: H = hessian(x) (an implementation may keep it where it is).
  virtual int gptq_factor(const float* x, int64_t n, int64_t k, double damp_percent, bool act_order, int64_t block,
                          GptqFactor* f);

  // Starts GPTQ's column loop on wp [in, out] with the factor f (one of this implementation's).
  virtual std::unique_ptr<GptqWork> gptq_begin(std::vector<float> wp, const GptqFactor& f, int64_t out) = 0;

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
