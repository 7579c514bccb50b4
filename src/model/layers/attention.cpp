#include "model/layers/attention.h"

#include "model/layers/linear.h"

#include <cstdint>

namespace frugal::model::layers {

Status gqa_attention(ops::Backend* b, DType act, const GqaWeights& w, const GqaShape& shape,
                     const StepInputs& step, const ops::KvCacheLayer& cache, const void* x,
                     void* residual, const GqaScratch& s, const ops::RmsNormParams* norm,
                     const ops::RmsNormParams* post_norm) {
  const int64_t n = step.n_tokens;
  const int64_t hidden = w.q.in;
  const int64_t q_dim = static_cast<int64_t>(shape.n_head) * shape.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_head_kv) * shape.head_dim;
  // Fused: one matmul writes rows [q | k | v] (leading dimension q_dim + 2 kv_dim).
  void* q = s.q;
  void* k = s.k;
  void* v = s.v;
  int64_t ld_q = q_dim, ld_kv = kv_dim;
  if (norm && !w.qkv) FRUGAL_RETURN_IF_ERROR(b->rms_norm(*norm));
  if (w.qkv) {
    ld_q = ld_kv = q_dim + 2 * kv_dim;
    k = static_cast<uint8_t*>(s.q) + dtype_bytes(act, q_dim);
    v = static_cast<uint8_t*>(s.q) + dtype_bytes(act, q_dim + kv_dim);
  }
  // RoPE then the cache write of the rotated k and of v: one op, one kernel where the backend fuses.
  const ops::RopeKvWriteParams rkv{
      .rope = {.q = q, .k = k, .act_dtype = act, .positions = step.positions, .inv_freq = step.inv_freq,
               .n_tokens = n, .ld_q = ld_q, .ld_k = ld_kv, .n_head = shape.n_head, .n_head_kv = shape.n_head_kv,
               .head_dim = shape.head_dim, .rotary_dim = shape.rotary_dim, .attention_factor = shape.attention_factor},
      .kv = {.cache = cache, .k = k, .v = v, .act_dtype = act, .ld_k = ld_kv, .ld_v = ld_kv,
             .slot_mapping = step.slot_mapping, .n_tokens = n}};
  if (w.qkv && norm) {
    FRUGAL_RETURN_IF_ERROR(norm_linear(b, *norm, *w.qkv, act, s.q, ld_q, false));
    FRUGAL_RETURN_IF_ERROR(b->rope_kv_write(rkv));
  } else if (w.qkv) {
    // The projection and RoPE + the cache write as one fused op (a backend may run the latter in
    // the matmul's epilogue); k and v's rows of s.q are scratch afterwards.
    FRUGAL_RETURN_IF_ERROR(b->matmul_rope_kv_write(
        ops::MatmulRopeKvWriteParams{.mm = linear_params(*w.qkv, act, x, hidden, s.q, ld_q, n, false), .rkv = rkv}));
  } else {
    FRUGAL_RETURN_IF_ERROR(linear(b, w.q, act, x, hidden, q, q_dim, n, false));
    FRUGAL_RETURN_IF_ERROR(linear(b, w.k, act, x, hidden, k, kv_dim, n, false));
    FRUGAL_RETURN_IF_ERROR(linear(b, w.v, act, x, hidden, v, kv_dim, n, false));
    FRUGAL_RETURN_IF_ERROR(b->rope_kv_write(rkv));
  }
  FRUGAL_RETURN_IF_ERROR(b->attention(ops::AttentionParams{
      .cache = cache, .q = q, .out = s.out, .act_dtype = act, .ld_q = ld_q, .ld_out = q_dim,
      .n_seqs = step.n_seqs, .n_tokens = static_cast<int32_t>(n), .q_start = step.q_start,
      .ctx_len = step.ctx_len, .block_tables = step.block_tables,
      .max_blocks_per_seq = step.max_blocks_per_seq, .max_ctx_len = step.max_ctx_len,
      .n_head = shape.n_head, .sliding_window = shape.sliding_window, .scale = shape.scale,
      .sink_tokens = shape.sink_tokens,
      .n_decode_seqs = step.n_decode_seqs, .decode_max_ctx_len = step.decode_max_ctx_len}));
  if (post_norm) return linear_norm(b, w.o, act, s.out, q_dim, residual, hidden, n, shape.accumulate_o, *post_norm);
  return linear(b, w.o, act, s.out, q_dim, residual, hidden, n, shape.accumulate_o);
}

}  // namespace frugal::model::layers
