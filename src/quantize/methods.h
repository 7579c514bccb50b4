// The calibrated methods (their heavy products through QuantMath, host or CUDA): GPTQ (one linear from its inputs' Hessian), AWQ (scale
// search and clipping for a group of linears sharing an input), SmoothQuant (smoothing scales),
// and the per-linear output error every method reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quantize/host_layer.h"
#include "quantize/math.h"
#include "quantize/rtn.h"

namespace frugal::quantize {

// H = 2/n X^T X of inputs x [n, k] (row-major), k x k, double.
std::vector<double> gptq_hessian(const std::vector<float>& x, int64_t n, int64_t k, QuantMath& m = host_math());

struct GptqOptions {
  IntSpec spec;
  double damp_percent = 0.01;
  int64_t block = 128;
  bool act_order = false;
  bool static_groups = false;
};

// GPTQ (Frantar et al. 2022, as AutoGPTQ's GPTQ.fasterquant): columns in order (or decreasing
// diag(H) with act_order), dead columns zeroed, H += damp * mean(diag(H)) I, U = upper Cholesky
// factor of H^-1, per column q = Q(w), err = (w - q) / U[j][j] propagated to the block's later
// columns, lazy update of the rest after each block. Group parameters come from the current
// (updated) weights at each group's first column, or from the original weights with
// static_groups. With act_order, g_idx[perm[j]] = j / group (GPTQ's desc_act g_idx).
Result<IntQuant> gptq_quantize(const std::string& tensor, const std::vector<float>& w, int64_t out, int64_t in,
                               std::vector<double> h, const GptqOptions& o, QuantMath& m = host_math());

// GPTQ's factor (math.h's GptqFactor) of one input, from H or from the inputs x [n, in]
// (through m: on the GPU the Hessian and factor stay there), for o's damping, order and block.
Result<GptqFactor> gptq_factor(const std::string& tensor, std::vector<double> h, int64_t in, const GptqOptions& o,
                               QuantMath& m = host_math());
Result<GptqFactor> gptq_factor(const std::string& tensor, const std::vector<float>& x, int64_t n, int64_t in,
                               const GptqOptions& o, QuantMath& m = host_math());
Result<IntQuant> gptq_quantize(const std::string& tensor, const std::vector<float>& w, int64_t out, const GptqFactor& f,
                               const GptqOptions& o, QuantMath& m = host_math());

// AWQ scale search (AutoAWQ's _search_best_scale without duo scaling): s = mean|x|^alpha,
// normalised by sqrt(max(s) min(s)), for alpha in {0, 1/grid, ...}; returns the s minimising
// sum over the linears of |x W^T - x (Q(W diag(s)) diag(1/s))^T|^2 on up to 512 tokens.
std::vector<float> awq_search_scales(const std::vector<const LinearF32*>& ls, const std::vector<float>& x, int64_t n,
                                     const IntSpec& spec, int32_t grid, QuantMath& m = host_math());
// AWQ clipping search (AutoAWQ's _compute_best_clip): per output row and group, the clamp
// max|w| * (1 - i/20), i < 10, minimising the group's output error on up to 128 tokens; clamps w.
void awq_clip(LinearF32& l, const std::vector<float>& x, int64_t n, const IntSpec& spec, QuantMath& m = host_math());

// SmoothQuant scales for linears sharing input x: s_j = max|x_j|^a / max|W_:j|^(1-a), >= 1e-5.
std::vector<float> smoothquant_scales(const std::vector<const LinearF32*>& ls, const std::vector<float>& x, int64_t n,
                                      double alpha);

// Multiplies column j of w by s[j] (fold into the consumer) / divides row j (into the producer).
void scale_columns(LinearF32& l, const std::vector<float>& s);
void divide_rows(LinearF32& l, const std::vector<float>& s);

// Relative output error |x W^T - xq Wq^T|^2 / |x W^T|^2 over the n rows of x [n, in]; xq is x
// itself when empty. Uses at most 512 rows (evenly spaced).
double relative_output_error(const std::vector<float>& x, int64_t n, const std::vector<float>& xq,
                             const std::vector<float>& w, const std::vector<float>& wq, int64_t out, int64_t in,
                             QuantMath& m = host_math());
// Per-token symmetric int8 fake quantization of x [n, in] divided column-wise by s (empty: 1).
std::vector<float> fake_quant_tokens_int8(const std::vector<float>& x, int64_t n, int64_t in, const std::vector<float>& s);

}  // namespace frugal::quantize
