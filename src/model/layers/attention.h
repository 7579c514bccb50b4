// Grouped-query self-attention block (Llama, Qwen2): q/k/v projections, RoPE, KV write,
// paged attention, o_proj added into the residual stream.
#pragma once

#include <optional>

#include "model/weights.h"
#include "ops/backend.h"

namespace frugal::model::layers {

struct GqaWeights {
  Linear q;  // [n_head * head_dim, hidden] (+ bias for Qwen2)
  Linear k;  // [n_head_kv * head_dim, hidden]
  Linear v;  // [n_head_kv * head_dim, hidden]
  Linear o;  // [hidden, n_head * head_dim]
  std::optional<Linear> qkv;  // q, k, v back to back in memory: one matmul (fuse_rows)
};

struct GqaShape {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t rotary_dim = 0;
  int32_t sliding_window = 0;  // 0: full attention
  int32_t sink_tokens = 0;     // with sliding_window: positions < sink_tokens are attended too
  float scale = 1.0f;
  float attention_factor = 1.0f;  // multiplies cos/sin (YaRN; model/rope.h)
  // o_proj adds into the residual (true), or overwrites it with this rank's partial sum
  // (tensor-parallel ranks other than 0: the all-reduce that follows adds them up).
  bool accumulate_o = true;
};

// Device metadata of one step, shared by every layer.
struct StepInputs {
  int64_t n_tokens = 0;
  int32_t n_seqs = 0;
  const int32_t* positions = nullptr;     // [n_tokens]
  const int32_t* slot_mapping = nullptr;  // [n_tokens]
  const int32_t* q_start = nullptr;       // [n_seqs + 1]
  const int32_t* ctx_len = nullptr;       // [n_seqs]
  const int32_t* block_tables = nullptr;  // [n_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  int32_t max_ctx_len = 0;
  const float* inv_freq = nullptr;        // [rotary_dim / 2]
  // Leading sequences with one new token each, and their longest context (ops::AttentionParams).
  int32_t n_decode_seqs = 0;
  int32_t decode_max_ctx_len = 0;
};

// Scratch activations, each with room for n_tokens rows.
struct GqaScratch {
  void* q;    // [n_tokens, n_head * head_dim]; with fused qkv: [n_tokens, (n_head + 2 n_head_kv) * head_dim]
  void* k;    // [n_tokens, n_head_kv * head_dim]
  void* v;    // [n_tokens, n_head_kv * head_dim]
  void* out;  // [n_tokens, n_head * head_dim]
};

// residual[n_tokens, hidden] += o_proj(attention(x)); x is the normed input [n_tokens, hidden].
// With `norm` (whose y is x) the input norm runs here too, as one fused op with the fused qkv
// projection (rms_norm_matmul) where w.qkv is set, else before the three projections. With
// `post_norm` (whose x is residual) the next norm runs with o_proj as one fused op
// (matmul_rms_norm: a backend may normalize in the projection's epilogue).
Status gqa_attention(ops::Backend* b, DType act, const GqaWeights& w, const GqaShape& shape,
                     const StepInputs& step, const ops::KvCacheLayer& cache, const void* x,
                     void* residual, const GqaScratch& s, const ops::RmsNormParams* norm = nullptr,
                     const ops::RmsNormParams* post_norm = nullptr);

}  // namespace frugal::model::layers
