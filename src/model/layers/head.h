// The tail every decoder family shares: the final RMSNorm over the residual stream (tapped as
// "out_norm"), the rows whose logits are wanted gathered, and lm_head into the step's f32 logits.
#pragma once

#include <span>
#include <vector>

#include "dist/communicator.h"
#include "model/family.h"
#include "model/layers/linear.h"
#include "model/shard.h"

namespace frugal::model::layers {

struct HeadBuffers {
  const void* resid;  // [n_tokens, hidden] residual stream
  void* xn;           // [n_tokens, hidden] scratch for the normed stream
  void* sel;          // [n_logits_rows, hidden] scratch for the gathered rows
};

// The final norm of the stream (tapped as "out_norm") and the rows whose logits are wanted
// gathered into buf.sel.
inline Status normed_logit_rows(const StepContext& step, const Norm& final_norm, const HeadBuffers& buf, int64_t hidden,
                                double eps) {
  ops::Backend* be = step.backend;
  const DType act = step.act;
  const int64_t n = step.in.n_tokens, rows = step.n_logits_rows;
  FRUGAL_RETURN_IF_ERROR(rms_norm(be, final_norm, act, buf.resid, buf.xn, n, eps));
  FRUGAL_RETURN_IF_ERROR(step.tap("out_norm", buf.xn, n, hidden));
  if (rows == 0) return Status::ok();
  return be->gather_rows(ops::GatherRowsParams{
      .x = buf.xn, .x_dtype = act, .ld_x = hidden, .rows = step.logits_rows,
      .out = buf.sel, .out_dtype = act, .ld_out = hidden, .n_rows = rows, .dim = hidden});
}

inline Status logits_head(const StepContext& step, const Norm& final_norm, const Linear& lm_head, const HeadBuffers& buf,
                          int64_t hidden, int64_t vocab, double eps) {
  ops::Backend* be = step.backend;
  const DType act = step.act;
  const int64_t rows = step.n_logits_rows;
  FRUGAL_RETURN_IF_ERROR(normed_logit_rows(step, final_norm, buf, hidden, eps));
  if (rows == 0) return Status::ok();
  return be->matmul(ops::MatmulParams{
      .x = buf.sel, .x_dtype = act, .ld_x = hidden, .w = lm_head.weight,
      .bias = nullptr, .bias_dtype = DType::kF32, .y = step.logits, .y_dtype = DType::kF32,
      .ld_y = vocab, .m = rows, .n = vocab, .k = hidden, .accumulate = false});
}

// Tensor parallel (vocab-parallel lm_head): this rank's vocab rows of lm_head into lm_local
// [rows, vocab_pad], all-gathered to lm_all [world, rows, vocab_pad], then each rank's block
// copied into its columns of the step's logits [rows, vocab]. row_ids holds 0, 1, ..., rows - 1.
struct VocabParallelBuffers {
  float* lm_local = nullptr;  // [R, vocab_pad]
  float* lm_all = nullptr;    // [world, R, vocab_pad]
  int32_t* row_ids = nullptr; // [R]
};

// Their workspace requests, appended after a family's own (R = max logit rows).
inline void add_vocab_parallel_buffers(std::vector<BufferRequest>& out, const RankLayout& l, int64_t R) {
  out.push_back({.name = "lm_local", .bytes = R * l.vocab_pad * 4});
  out.push_back({.name = "lm_all", .bytes = l.world * R * l.vocab_pad * 4});
  out.push_back({.name = "row_ids", .bytes = R * 4});
}
// Binds them from the family's pointers p[first], p[first + 1], p[first + 2] and uploads row_ids.
inline Status bind_vocab_parallel_buffers(ops::Backend* be, std::span<void* const> p, size_t first, size_t R,
                                          VocabParallelBuffers* out) {
  out->lm_local = static_cast<float*>(p[first]);
  out->lm_all = static_cast<float*>(p[first + 1]);
  out->row_ids = static_cast<int32_t*>(p[first + 2]);
  std::vector<int32_t> ids(R);
  for (size_t r = 0; r < R; ++r) ids[r] = static_cast<int32_t>(r);
  FRUGAL_RETURN_IF_ERROR(be->upload(out->row_ids, ids.data(), ids.size() * sizeof(int32_t)));
  return be->synchronize();
}

inline Status vocab_parallel_logits_head(const StepContext& step, const Norm& final_norm, const Linear& lm_head,
                                         const HeadBuffers& buf, const VocabParallelBuffers& tp, int64_t hidden,
                                         int64_t vocab, const RankLayout& layout, dist::Communicator& comm, double eps) {
  ops::Backend* be = step.backend;
  const DType act = step.act;
  const int64_t pad = layout.vocab_pad, rows = step.n_logits_rows;
  FRUGAL_RETURN_IF_ERROR(normed_logit_rows(step, final_norm, buf, hidden, eps));
  if (rows == 0) return Status::ok();
  FRUGAL_RETURN_IF_ERROR(be->matmul(ops::MatmulParams{
      .x = buf.sel, .x_dtype = act, .ld_x = hidden, .w = lm_head.weight, .bias = nullptr, .bias_dtype = DType::kF32,
      .y = tp.lm_local, .y_dtype = DType::kF32, .ld_y = pad, .m = rows, .n = lm_head.out, .k = hidden,
      .accumulate = false}));
  FRUGAL_RETURN_IF_ERROR(comm.all_gather(tp.lm_local, tp.lm_all, rows * pad, DType::kF32));
  for (int r = 0; r < layout.world; ++r) {
    const Range v = split_range(vocab, layout.world, r);
    FRUGAL_RETURN_IF_ERROR(be->gather_rows(ops::GatherRowsParams{
        .x = tp.lm_all + static_cast<int64_t>(r) * rows * pad, .x_dtype = DType::kF32, .ld_x = pad,
        .rows = tp.row_ids, .out = step.logits + v.begin, .out_dtype = DType::kF32, .ld_out = vocab,
        .n_rows = rows, .dim = v.count}));
  }
  return Status::ok();
}

}  // namespace frugal::model::layers
