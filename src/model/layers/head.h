// The tail every decoder family shares: the final RMSNorm over the residual stream (tapped as
// "out_norm"), the rows whose logits are wanted gathered, and lm_head into the step's f32 logits.
#pragma once

#include "model/family.h"
#include "model/layers/linear.h"

namespace frugal::model::layers {

struct HeadBuffers {
  const void* resid;  // [n_tokens, hidden] residual stream
  void* xn;           // [n_tokens, hidden] scratch for the normed stream
  void* sel;          // [n_logits_rows, hidden] scratch for the gathered rows
};

inline Status logits_head(const StepContext& step, const Norm& final_norm, const Linear& lm_head, const HeadBuffers& buf,
                          int64_t hidden, int64_t vocab, double eps) {
  ops::Backend* be = step.backend;
  const DType act = step.act;
  const int64_t n = step.in.n_tokens;
  FRUGAL_RETURN_IF_ERROR(rms_norm(be, final_norm, act, buf.resid, buf.xn, n, eps));
  FRUGAL_RETURN_IF_ERROR(step.tap("out_norm", buf.xn, n, hidden));
  const int64_t rows = step.n_logits_rows;
  if (rows == 0) return Status::ok();
  FRUGAL_RETURN_IF_ERROR(be->gather_rows(ops::GatherRowsParams{
      .x = buf.xn, .x_dtype = act, .ld_x = hidden, .rows = step.logits_rows,
      .out = buf.sel, .out_dtype = act, .ld_out = hidden, .n_rows = rows, .dim = hidden}));
  return be->matmul(ops::MatmulParams{
      .x = buf.sel, .x_dtype = act, .ld_x = hidden, .w = lm_head.weight,
      .bias = nullptr, .bias_dtype = DType::kF32, .y = step.logits, .y_dtype = DType::kF32,
      .ld_y = vocab, .m = rows, .n = vocab, .k = hidden, .accumulate = false});
}

}  // namespace frugal::model::layers
