// Linear and norm helpers: one backend op each, parameters filled from typed weights.
#pragma once

#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::model::layers {

// The Params of y[m, out] (+)= x[m, in] @ l.weight^T + l.bias (x and y in the activation dtype).
// accumulate adds into y (residual adds).
inline ops::MatmulParams linear_params(const Linear& l, DType act, const void* x, int64_t ld_x, void* y, int64_t ld_y,
                                       int64_t m, bool accumulate) {
  return ops::MatmulParams{.x = x, .x_dtype = act, .ld_x = ld_x, .w = l.weight, .bias = l.bias,
                           .bias_dtype = l.bias_dtype, .y = y, .y_dtype = act, .ld_y = ld_y, .m = m, .n = l.out,
                           .k = l.in, .accumulate = accumulate};
}

inline Status linear(ops::Backend* b, const Linear& l, DType act, const void* x, int64_t ld_x,
                     void* y, int64_t ld_y, int64_t m, bool accumulate) {
  return b->matmul(linear_params(l, act, x, ld_x, y, ld_y, m, accumulate));
}

// linear(l) into y, then `norm` over y (norm.x is y: the next block's input norm over the residual
// stream the projection adds into) as one fused op (matmul_rms_norm; a backend may normalize in
// the matmul's epilogue). y and norm.y are both written.
inline Status linear_norm(ops::Backend* b, const Linear& l, DType act, const void* x, int64_t ld_x, void* y,
                          int64_t ld_y, int64_t m, bool accumulate, const ops::RmsNormParams& norm) {
  return b->matmul_rms_norm(
      ops::MatmulRmsNormParams{.mm = linear_params(l, act, x, ld_x, y, ld_y, m, accumulate), .norm = norm});
}

// The Params of y[rows, dim] = rms_norm(x) * weight (x and y contiguous).
inline ops::RmsNormParams rms_norm_params(const Norm& n, DType act, const void* x, void* y, int64_t rows, double eps) {
  return ops::RmsNormParams{.x = x, .residual = nullptr, .y = y, .weight = n.weight, .act_dtype = act,
                            .weight_dtype = n.dtype, .rows = rows, .dim = n.dim, .ld_x = n.dim,
                            .ld_res = n.dim, .ld_y = n.dim, .eps = static_cast<float>(eps)};
}

inline Status rms_norm(ops::Backend* b, const Norm& n, DType act, const void* x, void* y, int64_t rows, double eps) {
  return b->rms_norm(rms_norm_params(n, act, x, y, rows, eps));
}

// linear(l) over norm's output (x = norm.y, ld_x = norm.ld_y): rms_norm then linear as one fused
// op (a backend may normalize in the matmul's kernel; norm.y is written either way).
inline Status norm_linear(ops::Backend* b, const ops::RmsNormParams& norm, const Linear& l, DType act, void* y,
                          int64_t ld_y, bool accumulate) {
  return b->rms_norm_matmul(ops::RmsNormMatmulParams{
      .norm = norm, .mm = linear_params(l, act, norm.y, norm.ld_y, y, ld_y, norm.rows, accumulate)});
}

}  // namespace frugal::model::layers
