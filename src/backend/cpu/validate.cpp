#include "backend/cpu/validate.h"

#include <algorithm>

#include <cmath>
#include <string>

#include "ops/weight_format_check.h"

namespace frugal::cpu {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status need(bool ok, const char* op, const std::string& what) {
  if (ok) return {};
  return invalid_argument(std::string(op) + ": " + what);
}

Status need_ptr(const void* ptr, const char* op, const char* field) {
  if (ptr) return {};
  return invalid_argument(std::string(op) + ": " + field + " is null");
}

Status need_f32(DType t, const char* op, const char* field) {
  if (t == DType::kF32) return {};
  return unsupported(std::string(op) + ": " + field + " must be f32 on the cpu backend, got " + dtype_name(t));
}

Status need_float(DType t, const char* op, const char* field) {
  if (is_float16_or_32(t)) return {};
  return unsupported(std::string(op) + ": " + field + " must be f32, bf16 or f16, got " + dtype_name(t));
}

// A [rows, width] matrix with row stride ld: ld must cover the width.
Status need_ld(int64_t ld, int64_t width, const char* op, const char* field) {
  if (ld >= width) return {};
  return invalid_argument(std::string(op) + ": " + field + " = " + str(ld) + " is less than the row width " + str(width));
}

Status validate_cache(const ops::KvCacheLayer& c, const char* op) {
  FRUGAL_RETURN_IF_ERROR(need_ptr(c.k_cache, op, "cache.k_cache"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(c.v_cache, op, "cache.v_cache"));
  if (c.cache_dtype != DType::kF32 && c.cache_dtype != DType::kBF16 && c.cache_dtype != DType::kF8E4M3 &&
      c.cache_dtype != DType::kI8)
    return unsupported(std::string(op) + ": cache.cache_dtype must be f32, bf16, f8_e4m3 or i8, got " +
                       dtype_name(c.cache_dtype));
  if (c.cache_dtype == DType::kI8) {
    FRUGAL_RETURN_IF_ERROR(need_ptr(c.k_scales, op, "cache.k_scales (int8 cache)"));
    FRUGAL_RETURN_IF_ERROR(need_ptr(c.v_scales, op, "cache.v_scales (int8 cache)"));
  }
  if (c.cache_dtype == DType::kF8E4M3)
    FRUGAL_RETURN_IF_ERROR(need(std::isfinite(c.k_scale) && c.k_scale > 0 && std::isfinite(c.v_scale) && c.v_scale > 0,
                                op, "fp8 cache scales must be finite and positive (k_scale " +
                                        std::to_string(c.k_scale) + ", v_scale " + std::to_string(c.v_scale) + ")"));
  FRUGAL_RETURN_IF_ERROR(need(c.n_blocks > 0 && c.block_size > 0 && c.n_head_kv > 0 && c.head_dim > 0, op,
                              "cache geometry must be positive (n_blocks " + str(c.n_blocks) + ", block_size " +
                                  str(c.block_size) + ", n_head_kv " + str(c.n_head_kv) + ", head_dim " +
                                  str(c.head_dim) + ")"));
  return {};
}

}  // namespace

bool is_float16_or_32(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

Status validate(const ops::EmbeddingParams& p) {
  const char* op = "embedding";
  FRUGAL_RETURN_IF_ERROR(need(p.n_tokens >= 0 && p.dim >= 0 && p.vocab >= 0, op, "negative n_tokens, dim or vocab"));
  FRUGAL_RETURN_IF_ERROR(need(p.vocab_begin >= 0 && p.full_vocab >= 0 && (p.full_vocab == 0 || p.vocab_begin + p.vocab <= p.full_vocab),
                              op, "the shard [vocab_begin, vocab_begin + vocab) lies outside [0, full_vocab)"));
  const int64_t full = p.full_vocab > 0 ? p.full_vocab : p.vocab;
  if (p.n_tokens == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.table, op, "table"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.ids, op, "ids"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.out, op, "out"));
  FRUGAL_RETURN_IF_ERROR(need_float(p.table_dtype, op, "table_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.out_dtype, op, "out_dtype"));
  for (int64_t t = 0; t < p.n_tokens; ++t)
    if (p.ids[t] < 0 || p.ids[t] >= full)
      return out_of_range("embedding: ids[" + str(t) + "] = " + str(p.ids[t]) + " is outside the vocabulary [0, " +
                          str(full) + ")");
  return {};
}

Status validate(const ops::RmsNormParams& p) {
  const char* op = "rms_norm";
  FRUGAL_RETURN_IF_ERROR(need(p.rows >= 0 && p.dim >= 0, op, "negative rows or dim"));
  if (p.rows == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need(p.dim > 0, op, "dim must be positive"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.x, op, "x"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.y, op, "y"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.weight, op, "weight"));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_float(p.weight_dtype, op, "weight_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_x, p.dim, op, "ld_x"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_y, p.dim, op, "ld_y"));
  if (p.residual) FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_res, p.dim, op, "ld_res"));
  FRUGAL_RETURN_IF_ERROR(need(p.eps >= 0, op, "eps must be >= 0"));
  return {};
}

Status validate(const ops::MatmulParams& p) {
  const char* op = "matmul";
  FRUGAL_RETURN_IF_ERROR(need(p.m >= 0 && p.n >= 0 && p.k >= 0, op,
                              "negative m, n or k (" + str(p.m) + ", " + str(p.n) + ", " + str(p.k) + ")"));
  if (p.m == 0 || p.n == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.x, op, "x"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.w.data, op, "w.data"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.y, op, "y"));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.x_dtype, op, "x_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.y_dtype, op, "y_dtype"));
  FRUGAL_RETURN_IF_ERROR(ops::check_weight_view(p.w, op));
  FRUGAL_RETURN_IF_ERROR(need(p.w.format.layout == ops::WeightLayout::kOutIn, op,
                              "weight layout out_in_tiles8 is the CUDA backend's (its kernels read it); the CPU reads out_in"));
  if (p.bias) FRUGAL_RETURN_IF_ERROR(need_float(p.bias_dtype, op, "bias_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_x, p.k, op, "ld_x"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_y, p.n, op, "ld_y"));
  return {};
}

Status validate(const ops::RopeParams& p) {
  const char* op = "rope";
  FRUGAL_RETURN_IF_ERROR(need(p.n_tokens >= 0, op, "negative n_tokens"));
  if (p.n_tokens == 0 || (!p.q && !p.k)) return {};
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.positions, op, "positions"));
  FRUGAL_RETURN_IF_ERROR(need(p.head_dim > 0 && p.head_dim <= 1024, op,
                              "head_dim must be in [1, 1024], got " + str(p.head_dim)));
  FRUGAL_RETURN_IF_ERROR(need(p.rotary_dim >= 0 && p.rotary_dim <= p.head_dim && p.rotary_dim % 2 == 0, op,
                              "rotary_dim must be even and <= head_dim " + str(p.head_dim) + ", got " +
                                  str(p.rotary_dim)));
  if (p.rotary_dim > 0) FRUGAL_RETURN_IF_ERROR(need_ptr(p.inv_freq, op, "inv_freq"));
  if (p.q) {
    FRUGAL_RETURN_IF_ERROR(need(p.n_head > 0, op, "n_head must be positive"));
    FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_q, static_cast<int64_t>(p.n_head) * p.head_dim, op, "ld_q"));
  }
  if (p.k) {
    FRUGAL_RETURN_IF_ERROR(need(p.n_head_kv > 0, op, "n_head_kv must be positive"));
    FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_k, static_cast<int64_t>(p.n_head_kv) * p.head_dim, op, "ld_k"));
  }
  return {};
}

Status validate(const ops::KvWriteParams& p) {
  const char* op = "kv_write";
  FRUGAL_RETURN_IF_ERROR(need(p.n_tokens >= 0, op, "negative n_tokens"));
  if (p.n_tokens == 0) return {};
  FRUGAL_RETURN_IF_ERROR(validate_cache(p.cache, op));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.k, op, "k"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.v, op, "v"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.slot_mapping, op, "slot_mapping"));
  const int64_t row = static_cast<int64_t>(p.cache.n_head_kv) * p.cache.head_dim;
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_k, row, op, "ld_k"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_v, row, op, "ld_v"));
  const int64_t n_slots = static_cast<int64_t>(p.cache.n_blocks) * p.cache.block_size;
  for (int64_t t = 0; t < p.n_tokens; ++t)
    if (p.slot_mapping[t] >= n_slots)
      return out_of_range("kv_write: slot_mapping[" + str(t) + "] = " + str(p.slot_mapping[t]) +
                          " is past the cache's " + str(n_slots) + " slots");
  return {};
}

namespace {

// The per-sequence index arrays: token ranges, context lengths and every block-table entry a
// sequence's context uses.
Status validate_sequences(const ops::AttentionParams& p) {
  const char* op = "attention";
  const auto& c = p.cache;
  FRUGAL_RETURN_IF_ERROR(need(p.q_start[0] == 0, op, "q_start[0] must be 0, got " + str(p.q_start[0])));
  FRUGAL_RETURN_IF_ERROR(need(p.q_start[p.n_seqs] == p.n_tokens, op,
                              "q_start[n_seqs] = " + str(p.q_start[p.n_seqs]) + " must equal n_tokens " +
                                  str(p.n_tokens)));
  const int64_t capacity = static_cast<int64_t>(p.max_blocks_per_seq) * c.block_size;
  for (int s = 0; s < p.n_seqs; ++s) {
    const int64_t n_q = static_cast<int64_t>(p.q_start[s + 1]) - p.q_start[s];
    const std::string seq = "sequence " + str(s) + ": ";
    FRUGAL_RETURN_IF_ERROR(need(n_q >= 0, op, seq + "q_start is decreasing"));
    FRUGAL_RETURN_IF_ERROR(need(p.ctx_len[s] >= n_q, op,
                                seq + "ctx_len " + str(p.ctx_len[s]) + " is less than its " + str(n_q) + " new tokens"));
    FRUGAL_RETURN_IF_ERROR(need(p.ctx_len[s] <= capacity, op,
                                seq + "ctx_len " + str(p.ctx_len[s]) + " exceeds max_blocks_per_seq * block_size = " +
                                    str(capacity)));
    const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
    const int64_t used = (p.ctx_len[s] + c.block_size - 1) / c.block_size;
    // With a window, blocks no query of the sequence sees (no sink, wholly behind the first
    // query's window) may have been returned to the pool (-1, kv::kNoBlock); the others must be valid.
    int64_t sink_blocks = used, window_block = 0;
    if (p.sliding_window > 0) {
      const int64_t lo = std::max<int64_t>(0, p.ctx_len[s] - n_q - p.sliding_window + 1);
      sink_blocks = (std::min<int64_t>(p.sink_tokens, lo) + c.block_size - 1) / c.block_size;
      window_block = lo / c.block_size;
    }
    for (int64_t b = 0; b < used; ++b) {
      const bool seen = b < sink_blocks || b >= window_block;
      if (!seen && table[b] == -1) continue;
      if (table[b] < 0 || table[b] >= c.n_blocks)
        return out_of_range("attention: " + seq + "block_tables[" + str(b) + "] = " + str(table[b]) +
                            " is outside [0, " + str(c.n_blocks) + ")");
    }
  }
  return {};
}

}  // namespace

Status validate(const ops::AttentionParams& p) {
  const char* op = "attention";
  FRUGAL_RETURN_IF_ERROR(need(p.n_seqs >= 0 && p.n_tokens >= 0, op, "negative n_seqs or n_tokens"));
  if (p.n_seqs == 0 || p.n_tokens == 0) return {};
  FRUGAL_RETURN_IF_ERROR(validate_cache(p.cache, op));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.q, op, "q"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.out, op, "out"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.q_start, op, "q_start"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.ctx_len, op, "ctx_len"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.block_tables, op, "block_tables"));
  FRUGAL_RETURN_IF_ERROR(need(p.n_head > 0 && p.n_head % p.cache.n_head_kv == 0, op,
                              "n_head " + str(p.n_head) + " must be a positive multiple of n_head_kv " +
                                  str(p.cache.n_head_kv)));
  FRUGAL_RETURN_IF_ERROR(need(p.max_blocks_per_seq > 0, op, "max_blocks_per_seq must be positive"));
  FRUGAL_RETURN_IF_ERROR(need(p.sliding_window >= 0, op, "sliding_window must be >= 0"));
  FRUGAL_RETURN_IF_ERROR(need(p.sink_tokens >= 0, op, "sink_tokens must be >= 0"));
  const int64_t width = static_cast<int64_t>(p.n_head) * p.cache.head_dim;
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_q, width, op, "ld_q"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_out, width, op, "ld_out"));
  return validate_sequences(p);
}

Status validate(const ops::SiluMulParams& p) {
  const char* op = "silu_mul";
  FRUGAL_RETURN_IF_ERROR(need(p.n_tokens >= 0 && p.dim >= 0, op, "negative n_tokens or dim"));
  if (p.n_tokens == 0 || p.dim == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.gate, op, "gate"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.up, op, "up"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.out, op, "out"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_gate, p.dim, op, "ld_gate"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_up, p.dim, op, "ld_up"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_out, p.dim, op, "ld_out"));
  return {};
}

Status validate(const ops::GatherRowsParams& p) {
  const char* op = "gather_rows";
  FRUGAL_RETURN_IF_ERROR(need(p.n_rows >= 0 && p.dim >= 0, op, "negative n_rows or dim"));
  if (p.n_rows == 0 || p.dim == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.x, op, "x"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.rows, op, "rows"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.out, op, "out"));
  FRUGAL_RETURN_IF_ERROR(need_float(p.x_dtype, op, "x_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_float(p.out_dtype, op, "out_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_x, p.dim, op, "ld_x"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_out, p.dim, op, "ld_out"));
  for (int64_t i = 0; i < p.n_rows; ++i)
    if (p.rows[i] < 0) return out_of_range("gather_rows: rows[" + str(i) + "] = " + str(p.rows[i]) + " is negative");
  return {};
}

Status validate(const ops::MoeRouteParams& p) {
  const char* op = "moe_route";
  FRUGAL_RETURN_IF_ERROR(need(p.n_tokens >= 0, op, "negative n_tokens"));
  FRUGAL_RETURN_IF_ERROR(need(p.n_experts > 0 && p.n_experts <= ops::kMoeMaxExperts, op,
                              "n_experts must be in [1, " + str(ops::kMoeMaxExperts) + "]"));
  FRUGAL_RETURN_IF_ERROR(need(p.top_k > 0 && p.top_k <= p.n_experts && p.top_k <= ops::kMoeMaxTopK, op,
                              "top_k must be in [1, min(n_experts, " + str(ops::kMoeMaxTopK) + ")]"));
  FRUGAL_RETURN_IF_ERROR(need(p.n_group > 0 && p.n_experts % p.n_group == 0, op, "n_group must divide n_experts"));
  FRUGAL_RETURN_IF_ERROR(need(p.topk_group > 0 && p.topk_group <= p.n_group, op, "topk_group must be in [1, n_group]"));
  FRUGAL_RETURN_IF_ERROR(need(p.method == ops::MoeTopk::kGreedy || p.top_k <= p.topk_group * (p.n_experts / p.n_group), op,
                              "top_k exceeds the experts of topk_group groups"));
  if (p.n_tokens == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.logits, op, "logits"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.topk_idx, op, "topk_idx"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.topk_weight, op, "topk_weight"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_logits, p.n_experts, op, "ld_logits"));
  if (p.bias) FRUGAL_RETURN_IF_ERROR(need_float(p.bias_dtype, op, "bias_dtype"));
  return {};
}

Status validate(const ops::ScaleRowsParams& p) {
  const char* op = "scale_rows";
  FRUGAL_RETURN_IF_ERROR(need(p.rows >= 0 && p.dim >= 0 && p.ld_scale >= 0, op, "negative rows, dim or ld_scale"));
  if (p.rows == 0 || p.dim == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.x, op, "x"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.scale, op, "scale"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_x, p.dim, op, "ld_x"));
  return {};
}

Status validate(const ops::BatchedMatmulParams& p) {
  const char* op = "batched_matmul";
  FRUGAL_RETURN_IF_ERROR(need(p.batch >= 0 && p.m >= 0 && p.n >= 0 && p.k >= 0, op, "negative batch, m, n or k"));
  if (p.batch == 0 || p.m == 0 || p.n == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.x, op, "x"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.w, op, "w"));
  FRUGAL_RETURN_IF_ERROR(need_ptr(p.y, op, "y"));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.x_dtype, op, "x_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_f32(p.y_dtype, op, "y_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_float(p.w_dtype, op, "w_dtype"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_x, p.k, op, "ld_x"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_y, p.n, op, "ld_y"));
  return {};
}

Status validate(const ops::MoeExpertsParams& p) {
  const char* op = "moe_experts";
  FRUGAL_RETURN_IF_ERROR(need(p.n_tokens >= 0 && p.hidden > 0 && p.inter > 0, op, "n_tokens, hidden and inter must be positive"));
  FRUGAL_RETURN_IF_ERROR(need(p.n_experts > 0 && p.n_experts <= ops::kMoeMaxExperts, op,
                              "n_experts must be in [1, " + str(ops::kMoeMaxExperts) + "]"));
  FRUGAL_RETURN_IF_ERROR(need(p.first_expert >= 0 && p.n_routed >= 0 && p.routed() <= ops::kMoeMaxExperts &&
                                  p.first_expert + p.n_experts <= p.routed(),
                              op, "experts [first_expert, first_expert + n_experts) must lie in [0, n_routed <= " +
                                      str(ops::kMoeMaxExperts) + ")"));
  FRUGAL_RETURN_IF_ERROR(need(p.top_k > 0 && p.top_k <= p.routed() && p.top_k <= ops::kMoeMaxTopK, op,
                              "top_k must be in [1, min(n_routed, " + str(ops::kMoeMaxTopK) + ")]"));
  FRUGAL_RETURN_IF_ERROR(ops::check_weight_format(p.format, op));
  FRUGAL_RETURN_IF_ERROR(need(p.shared_inter >= 0, op, "shared_inter must not be negative"));
  if (p.has_shared())
    for (const ops::WeightView* w : {&p.shared_gate, &p.shared_up, &p.shared_down}) {
      FRUGAL_RETURN_IF_ERROR(ops::check_weight_format(w->format, op));
      FRUGAL_RETURN_IF_ERROR(need_ptr(w->data, op, "shared_gate, shared_up or shared_down (shared_inter > 0)"));
    }
  if (p.n_tokens == 0) return {};
  FRUGAL_RETURN_IF_ERROR(need_f32(p.act_dtype, op, "act_dtype"));
  for (const void* q : {p.x, static_cast<const void*>(p.out), static_cast<const void*>(p.topk_idx),
                        static_cast<const void*>(p.topk_weight), static_cast<const void*>(p.gate),
                        static_cast<const void*>(p.up), static_cast<const void*>(p.down)})
    FRUGAL_RETURN_IF_ERROR(need_ptr(q, op, "x, out, topk_idx, topk_weight or an expert table"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_x, p.hidden, op, "ld_x"));
  FRUGAL_RETURN_IF_ERROR(need_ld(p.ld_out, p.hidden, op, "ld_out"));
  for (int64_t i = 0; i < p.n_tokens * p.top_k; ++i)
    FRUGAL_RETURN_IF_ERROR(need(p.topk_idx[i] >= 0 && p.topk_idx[i] < p.routed(), op,
                                "topk_idx[" + str(i) + "] = " + str(p.topk_idx[i]) + " is not an expert id in [0, " +
                                    str(p.routed()) + ")"));
  return {};
}

}  // namespace frugal::cpu
