// One POD Params struct per op: the contract between the model code and every backend.
// Pointers are device pointers of the backend that runs the op (host pointers on the CPU).
// No STL types here: this header is included by .cu files.
//
// Token layout: a forward step processes a flat list of n_tokens tokens from n_seqs sequences
// (varlen, vLLM style): sequence s owns tokens [q_start[s], q_start[s+1]). Activations are
// row-major [n_tokens, width] with a leading dimension (row stride) in elements.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/weight_format.h"

namespace frugal::ops {

// out[t, :] = table[ids[t], :]   table: [vocab, dim] (any float dtype), out: [n_tokens, dim]
struct EmbeddingParams {
  const void* table;
  DType table_dtype;
  const int32_t* ids;  // [n_tokens]
  void* out;
  DType out_dtype;
  int64_t n_tokens;
  int64_t dim;
  int64_t vocab;        // rows of table
  // Vocab-parallel (a tensor-parallel rank's shard): table holds rows [vocab_begin, vocab_begin +
  // vocab) of a vocabulary of full_vocab ids (0: vocab); an id outside the shard gives a zero row
  // (the ranks' outputs are then summed). ids must lie in [0, full_vocab).
  int64_t vocab_begin = 0;
  int64_t full_vocab = 0;
};

// y = rms_norm(x (+ residual)) * weight. If residual != nullptr: x_sum = x + residual is
// written back to residual (the running residual stream) and normalized.
//   x: [rows, dim] (ld_x), residual: [rows, dim] (ld_res), y: [rows, dim] (ld_y), weight: [dim]
struct RmsNormParams {
  const void* x;
  void* residual;  // optional, in/out
  void* y;
  const void* weight;
  DType act_dtype;     // dtype of x, residual, y
  DType weight_dtype;
  int64_t rows;
  int64_t dim;
  int64_t ld_x;
  int64_t ld_res;
  int64_t ld_y;
  float eps;
};

// y[m, n] = x[m, k] @ W[n, k]^T + bias[n]     (W as HF nn.Linear's weight: [out, in])
// accumulate: y += result (used for the residual add after o_proj / down_proj).
// W is stored in w.format (ops/weight_format.h): its data and any scale / zero-point / g_idx
// tensors are device pointers in w; a backend refuses a format it has no kernels for.
struct MatmulParams {
  const void* x;
  DType x_dtype;
  int64_t ld_x;
  WeightView w;
  const void* bias;  // optional, [n], dtype bias_dtype
  DType bias_dtype;
  void* y;
  DType y_dtype;
  int64_t ld_y;
  int64_t m;
  int64_t n;
  int64_t k;
  bool accumulate;
};

// Rotary embedding in place, HF "rotate_half" convention (pairs i and i + rotary_dim/2), or
// with `interleaved` the pairs (2i, 2i + 1) (DeepSeek's complex-number form); pair i turns by
// position * inv_freq[i] either way.
// All rope scaling types (linear, dynamic NTK, llama3, ...) are folded into inv_freq by the
// model on the host; attention_factor multiplies cos/sin (1 for all but YaRN-style scalings).
//   q: [n_tokens, n_head, head_dim] (ld_q per token), k: [n_tokens, n_head_kv, head_dim] (ld_k)
struct RopeParams {
  void* q;
  void* k;
  DType act_dtype;
  const int32_t* positions;  // [n_tokens] absolute positions
  const float* inv_freq;     // [rotary_dim / 2]
  int64_t n_tokens;
  int64_t ld_q;
  int64_t ld_k;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t rotary_dim;  // <= head_dim; dims past it are left unrotated
  float attention_factor;
  bool interleaved = false;
};

// Paged KV cache for one layer: k_cache and v_cache are [n_blocks, block_size, n_head_kv,
// head_dim] in cache_dtype. A token's slot is block_id * block_size + offset.
// Quantized caches (ops/kv_quant.h): int8 also has k_scales and v_scales, one f32 per
// (slot, kv head), [n_blocks * block_size, n_head_kv]; fp8 e4m3 has the per-layer scalars
// k_scale and v_scale (a stored element is x / scale).
struct KvCacheLayer {
  void* k_cache;
  void* v_cache;
  DType cache_dtype;
  int32_t n_blocks;
  int32_t block_size;
  int32_t n_head_kv;
  int32_t head_dim;
  float* k_scales = nullptr;  // int8 only
  float* v_scales = nullptr;  // int8 only
  float k_scale = 1.0f;       // fp8 only
  float v_scale = 1.0f;       // fp8 only
};

// Writes the new tokens' k and v into their slots. slot_mapping[t] < 0 skips token t.
//   k, v: [n_tokens, n_head_kv, head_dim] with row strides ld_k, ld_v (elements)
struct KvWriteParams {
  KvCacheLayer cache;
  const void* k;
  const void* v;
  DType act_dtype;
  int64_t ld_k;
  int64_t ld_v;
  const int32_t* slot_mapping;  // [n_tokens]
  int64_t n_tokens;
};

// rope(rope) then kv_write(kv) (fused op, ops/op_list.h): decode's RoPE and cache write. In the
// model kv.k is rope.k (the rotated keys go to the cache) and kv.v sits in the same [q | k | v]
// rows; a backend may then run both in one kernel, with the results of the two ops (q and k
// rotated in place, the cache written from the rotated k). Any other Params run as the sequence.
struct RopeKvWriteParams {
  RopeParams rope;
  KvWriteParams kv;
};

// matmul(mm) then rope_kv_write(rkv) (fused op, ops/op_list.h): the fused qkv projection, then RoPE
// and the cache write over its rows. In the model rkv reads mm.y's [q | k | v] rows (rope.q is
// mm.y, rope.k and kv.k its k columns, kv.v its v columns, every ld mm.ld_y, n_tokens mm.m, no
// accumulate); a backend may then run RoPE and the cache write in the matmul's epilogue (CUDA:
// over its split-k partials). Results: mm.y's q rows rotated (what attention reads) and the cache;
// mm.y's k and v rows are scratch. Any other Params run as the sequence.
struct MatmulRopeKvWriteParams {
  MatmulParams mm;
  RopeKvWriteParams rkv;
};

// rms_norm(norm) then rope(rope) then kv_write(kv) (fused op, ops/op_list.h): MLA's latent cache
// row (model/deepseek.cpp). In the model the rows [c | k_pe] of kv_a's output are normalized on
// c in place (norm.x == norm.y, no residual, norm.dim = kv_lora_rank), rope turns q_pe of every
// q head (rope.q) and k_pe (rope.k == norm.y + norm.dim, one kv head, rotary_dim =
// qk_rope_head_dim) in place, and kv writes the whole row (kv.k == kv.v == norm.y, one kv head of
// norm.dim + rotary_dim values; the latent cache's k_cache == v_cache); q does not overlap the
// rows. A backend may then run the three in one kernel, with the three ops' results (the rows
// normalized and rotated, q rotated, the cache written from the rounded row). Any other Params
// run as the sequence.
struct MlaKvPrologueParams {
  RmsNormParams norm;
  RopeParams rope;
  KvWriteParams kv;
};

// Causal attention of each sequence's new tokens over its whole context in the paged cache
// (the new tokens' k/v must already be written). Query token i of sequence s sits at absolute
// position ctx_len[s] - n_q(s) + i and attends to positions <= its own (and, with
// sliding_window > 0, > its own - sliding_window). GQA: query head h reads kv head
// h / (n_head / n_head_kv). Covers prefill (n_q > 1, with or without cached prefix) and decode.
//   q: [n_tokens, n_head, head_dim] (ld_q), out: [n_tokens, n_head, head_dim] (ld_out)
struct AttentionParams {
  KvCacheLayer cache;
  const void* q;
  void* out;
  DType act_dtype;
  int64_t ld_q;
  int64_t ld_out;
  int32_t n_seqs;
  int32_t n_tokens;
  const int32_t* q_start;       // [n_seqs + 1] prefix sums of new tokens per sequence
  const int32_t* ctx_len;       // [n_seqs] tokens in the cache after this step's writes
  const int32_t* block_tables;  // [n_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq;
  int32_t max_ctx_len;          // max of ctx_len (sizing hint for kernels)
  int32_t n_head;
  int32_t sliding_window;       // 0 = none
  float scale;                  // usually 1/sqrt(head_dim)
  // With sliding_window > 0: positions < sink_tokens are attended too (StreamingLLM's attention
  // sinks, --kv-sinks), so query p sees [0, sink_tokens) and (p - sliding_window, p].
  int32_t sink_tokens = 0;
  // Layout hint for mixed steps (0 = none): sequences [0, n_decode_seqs) have exactly one new
  // token each (tokens [0, n_decode_seqs)), and decode_max_ctx_len bounds their ctx_len. A
  // backend may run them with its decode kernel and the rest with its prefill kernel.
  int32_t n_decode_seqs = 0;
  int32_t decode_max_ctx_len = 0;
};

// out[t, j] = silu(gate[t, j]) * up[t, j]    gate/up/out: [n_tokens, dim] with row strides
struct SiluMulParams {
  const void* gate;
  const void* up;
  void* out;
  DType act_dtype;
  int64_t n_tokens;
  int64_t dim;
  int64_t ld_gate;
  int64_t ld_up;
  int64_t ld_out;
};

// out[i, :] = x[rows[i], :] (+ optional conversion)   x: [*, dim] (ld_x), out: [n_rows, dim]
struct GatherRowsParams {
  const void* x;
  DType x_dtype;
  int64_t ld_x;
  const int32_t* rows;
  void* out;
  DType out_dtype;
  int64_t ld_out;
  int64_t n_rows;
  int64_t dim;
};

// DeepSeek MoE routing (transformers' DeepseekV2Moe / DeepseekV3MoE route_tokens_to_experts),
// per token over router logits [n_tokens, n_experts] (f32, row stride ld_logits):
//   score  = softmax(logits) (kSoftmax, V2) or sigmoid(logits) (kSigmoid, V3)
//   choice = score + bias[e] (bias: V3's e_score_correction_bias, or nullptr)
//   kGreedy: the top_k experts by choice.
//   kGroupLimitedGreedy / kNoauxTc: experts form n_group equal groups; a group scores the max
//     (group_limited_greedy) or the sum of the top 2 (noaux_tc) of its choices; choices outside
//     the topk_group best groups become 0 (masked_fill(0.0), as transformers), then top_k.
//   weight = score of the chosen expert (kNoauxTc), or the masked choice (greedy methods);
//   norm_topk_prob: weight /= (sum of the top_k weights + 1e-20); then weight *= routed_scaling_factor.
// Ties go to the lower expert / group id. Outputs (device memory): topk_idx and topk_weight
// [n_tokens, top_k] in descending choice order, and (if not nullptr) dense_weight
// [n_tokens, n_experts] holding the weight at the chosen experts and 0 elsewhere.
enum class MoeScoring : int32_t { kSoftmax, kSigmoid };
enum class MoeTopk : int32_t { kGreedy, kGroupLimitedGreedy, kNoauxTc };
inline constexpr int32_t kMoeMaxExperts = 512;
inline constexpr int32_t kMoeMaxTopK = 16;

struct MoeRouteParams {
  const float* logits;
  int64_t ld_logits;
  const void* bias;  // [n_experts] or nullptr
  DType bias_dtype;
  int64_t n_tokens;
  int32_t n_experts;  // <= kMoeMaxExperts
  int32_t top_k;      // <= kMoeMaxTopK
  int32_t n_group;    // divides n_experts; 1 for greedy
  int32_t topk_group;
  MoeScoring scoring;
  MoeTopk method;
  bool norm_topk_prob;
  float routed_scaling_factor;
  int32_t* topk_idx;
  float* topk_weight;
  float* dense_weight;
};

// rms_norm(norm) then matmul(mm) (fused op, ops/op_list.h): a block's input norm and its first
// projection (the fused qkv, or MLA's fused q / kv_a). In the model mm.x is norm.y (x_dtype
// norm.act_dtype, ld_x norm.ld_y, k norm.dim), no residual, and norm.y does not overlap norm.x; a
// backend may then normalize inside the matmul's kernel (its GEMV, or its FP8 activation
// quantization). norm.y is scratch: its contents afterwards are unspecified (no later op may read
// it); mm.y is the result. Any other Params run as the sequence.
struct RmsNormMatmulParams {
  RmsNormParams norm;
  MatmulParams mm;
};

// matmul(mm) then rms_norm(norm) (fused op, ops/op_list.h): a projection that adds into the
// residual stream (o, down) and the next block's input norm over it. In the model norm.x is mm.y
// (ld_x mm.ld_y, rows mm.m, dim mm.n), no residual, and norm.y apart from mm.y; a backend may then
// normalize in the matmul's epilogue (CUDA: over its split-k partials, with no reduce kernel of
// its own). mm.y and norm.y are both results (the stream and its norm). Any other Params run as
// the sequence.
struct MatmulRmsNormParams {
  MatmulParams mm;
  RmsNormParams norm;
};

// rms_norm(norm), matmul(mm), then moe_route(route) (fused op, ops/op_list.h): DeepSeekMoE's
// router over the block's input norm. In the model mm.x is norm.y (ld_x norm.ld_y, k norm.dim; no
// residual, norm.y apart from norm.x) and mm writes the f32 logits route reads (mm.y ==
// route.logits, y_dtype f32, ld_y == route.ld_logits, mm.m == route.n_tokens == norm.rows, mm.n ==
// route.n_experts, no bias, no accumulate); a backend may then run all three in one kernel.
// norm.y (the experts' input) and mm.y (the logits) are written either way. Any other Params
// run as the sequence.
struct MoeRouterParams {
  RmsNormParams norm;
  MatmulParams mm;
  MoeRouteParams route;
};

// x[t, j] *= scale[t * ld_scale] for t < rows, j < dim (x in act_dtype, row stride ld_x; scale
// f32): a routed expert's output weighted by the router (dense_weight's column of the expert).
struct ScaleRowsParams {
  void* x;
  DType act_dtype;
  int64_t ld_x;
  int64_t rows;
  int64_t dim;
  const float* scale;
  int64_t ld_scale;
};

// matmul(mm) then silu_mul(act) (fused op, ops/op_list.h): SwiGLU's gate_up projection. In the
// model act.gate and act.up are the two halves of mm.y (rows [gate | up]: act.dim = mm.n / 2,
// act.gate = mm.y, act.up = mm.y + act.dim, ld_gate = ld_up = mm.ld_y, no accumulate); a backend
// may then compute silu(gate) * up in the matmul's epilogue and not write mm.y. mm.y is scratch:
// its contents afterwards are unspecified; act.out (the product) is the result, and must not
// overlap mm.x or mm.y. Any other Params run as the sequence.
struct MatmulSiluMulParams {
  MatmulParams mm;
  SiluMulParams act;
};

// silu_mul(act) then matmul(mm) (fused op, ops/op_list.h): SwiGLU's down projection over the
// product. In the model mm.x is act.out (x_dtype act.act_dtype, ld_x act.ld_out, k act.dim,
// m act.n_tokens); a backend may then feed the matmul from gate and up directly and not write
// act.out (CUDA: an FP8 W8A8 down projection quantizes silu(gate) * up, rounded to act_dtype
// as silu_mul rounds it, into its FP8 activations in one kernel). act.out is scratch: its
// contents afterwards are unspecified; mm.y is the result. Any other Params run as the sequence.
struct SiluMulMatmulParams {
  SiluMulParams act;
  MatmulParams mm;
};

// A batch of independent matmuls with dense weights (MLA's per-head absorbed projections):
//   y[b][i, o] = sum_j x[b][i, j] * w[b][o, j]    b < batch, i < m, o < n, j < k
// x[b] starts stride_x elements after x[b - 1] (rows ld_x apart), w[b] ([n, k] row-major, dtype
// w_dtype) stride_w after w[b - 1], y[b] stride_y after y[b - 1] (rows ld_y apart).
struct BatchedMatmulParams {
  const void* x;
  DType x_dtype;
  int64_t ld_x;
  int64_t stride_x;
  const void* w;
  DType w_dtype;
  int64_t stride_w;
  void* y;
  DType y_dtype;
  int64_t ld_y;
  int64_t stride_y;
  int64_t batch;
  int64_t m;
  int64_t n;
  int64_t k;
};

// attention(attn) then batched_matmul(mm) of its output per head (fused op, ops/op_list.h): MLA's
// W_UV after attention in the latent space. In the model mm.x is attn.out (mm.stride_x the head's
// width, mm.ld_x attn.ld_out, mm.k at most the head's width: W_UV reads the latent part of each
// head's row). A backend may then merge the attention's splits straight into the matmul and not
// write attn.out: attn.out is scratch, its contents afterwards unspecified; mm.y is the result,
// and must not overlap attn.q or attn.out. Any other Params run as the sequence.
struct AttentionBatchedMatmulParams {
  AttentionParams attn;
  BatchedMatmulParams mm;
};

// MLA's attention part of a DeepSeek layer with absorbed weights (fused op, ops/op_list.h), the
// model's sequence (model/deepseek.cpp, q_lora_rank 0): rms_norm_matmul(qkv) (xn = rms_norm of
// the residual stream, then the fused q / kv_a projection into rows [q | c | k_pe]),
// mla_kv_prologue(prologue) (c normalized, q_pe and k_pe rotated, the latent row into the cache),
// batched_matmul(absorb) (W_abs per head into [q_abs | q_pe] rows), attention_batched_matmul(attn)
// (attention in the latent space, then W_UV per head), then matmul(o) accumulating into the
// residual stream. Results: o.mm's y (the residual stream) and the cache row; every buffer in
// between (qkv.norm.y, qkv.mm.y's rows, absorb.y, attn.attn.out, attn.mm.y) is scratch, its
// contents afterwards unspecified. A backend may then run the whole part in fewer kernels
// (CUDA: one persistent kernel for a single decode token). Any other Params run as the sequence.
// absorb_rope_identity is a promise about absorb.w, not a change of the results: in every W_abs[h]
// ([n, k], k = nope + r with r = prologue.rope.rotary_dim, n = rank + r) the last r rows are
// [0 | I] (they copy the rotated q_pe) and the first rank rows are zero over the last r columns
// (the model's absorbed weight always is). A backend may then take those r values of every
// [q_abs | q_pe] row from the prologue's rotation and multiply only the first rows over the nope
// columns, with no dependency between the two (CUDA: one launch); false: no promise.
struct MlaAttentionParams {
  RmsNormMatmulParams qkv;
  MlaKvPrologueParams prologue;
  BatchedMatmulParams absorb;
  AttentionBatchedMatmulParams attn;
  MatmulParams o;
  bool absorb_rope_identity = false;
};

// A DeepSeekMoE layer's experts over tokens grouped by expert (each token runs only its top_k
// routed experts) plus, optionally, its shared experts (one gated MLP every token runs):
//   h[t, k]  = act(silu(x[t] . gate_e[j]) * (x[t] . up_e[j]))   j < inter, e = topk_idx[t, k]
//   hs[t]    = act(silu(x[t] . shared_gate[j]) * (x[t] . shared_up[j]))   j < shared_inter
//   out[t]   = act(out[t] + sum_{k = 0 .. top_k - 1} topk_weight[t, k] * (h[t, k] . down_e[i])
//                         + hs[t] . shared_down[i])
// with f32 accumulation (no rounding of the gate and up dot products, h and hs rounded to the
// activation dtype, out rounded once) and the k sum in k order, the shared term last (so a
// token's result does not depend on what else is in the step). That is the reference's rounding;
// a backend that runs the shared MLP as its own ops after the routed sum (CUDA outside its tiny
// path, the CPU) rounds out twice and may round gate and up to act: within a rounding of out.
// gate / up / down are [n_experts] arrays of WeightViews ([inter, hidden], [inter, hidden],
// [hidden, inter]) in device memory (host memory on host backends), all of `format`;
// topk_idx / topk_weight are moe_route's outputs. `scratch` is device memory of
// moe_experts_scratch_bytes(...) bytes for the largest n_tokens of the step shape, so a
// captured step needs no host sync on the routing results.
// Expert parallelism: a rank holds experts [first_expert, first_expert + n_experts) of the
// n_routed the router chooses from (topk_idx holds global ids); pairs routed to other ranks'
// experts add nothing here (their ranks add them; one all-reduce sums the ranks). Under tensor
// parallelism the shared experts are the rank's channels (shared_inter of them, down's columns).
struct MoeExpertsParams {
  const void* x;
  DType act_dtype;
  int64_t ld_x;
  void* out;
  int64_t ld_out;
  int64_t n_tokens;
  int64_t hidden;
  int64_t inter;
  int32_t n_experts;  // <= kMoeMaxExperts
  int32_t top_k;      // <= kMoeMaxTopK
  const int32_t* topk_idx;    // [n_tokens, top_k]
  const float* topk_weight;   // [n_tokens, top_k]
  const WeightView* gate;     // [n_experts]
  const WeightView* up;       // [n_experts]
  const WeightView* down;     // [n_experts]
  WeightFormat format;        // of every expert matrix
  void* scratch;
  int64_t scratch_bytes;
  int32_t first_expert = 0;   // global id of gate[0] / up[0] / down[0]
  int32_t n_routed = 0;       // experts topk_idx ranges over (0: n_experts, all of them here)
  // The shared experts as one gated MLP of shared_inter channels (0: none), views held by value
  // (each in its own format): shared_gate / shared_up [shared_inter, hidden], shared_down
  // [hidden, shared_inter]. shared_gate_up (optional, data nullptr: none) is gate and up back to
  // back as one [2 shared_inter, hidden] weight, for backends that run the MLP as one matmul.
  int64_t shared_inter = 0;
  WeightView shared_gate = {};
  WeightView shared_up = {};
  WeightView shared_down = {};
  WeightView shared_gate_up = {};
  bool subset() const { return first_expert != 0 || (n_routed != 0 && n_routed != n_experts); }
  int32_t routed() const { return n_routed != 0 ? n_routed : n_experts; }
  bool has_shared() const { return shared_inter > 0; }
};

// moe_router(router) then moe_experts(experts) (fused op, ops/op_list.h): a DeepSeekMoE block's
// routing and its experts. In the model experts.x is router.norm.y (ld_x router.norm.ld_y),
// experts.topk_idx / topk_weight are router.route.topk_idx / topk_weight, and experts.n_tokens ==
// router.route.n_tokens == router.mm.m; a backend may then route inside its expert kernels
// instead of in a kernel of its own (every backend runs the sequence today; CUDA's routing inside
// its tiny MoE path's gate_up blocks is built for measurement: docs/perf/2026-12-07-session62.md).
// Every output of the two ops is written either way (norm.y, the logits, topk_idx, topk_weight,
// dense_weight, experts.out), with the two ops' values. Any other Params run as the sequence.
struct MoeBlockParams {
  MoeRouterParams router;
  MoeExpertsParams experts;
};

// Scratch moe_experts needs for n_tokens (every backend's layout fits in this): the token
// permutation and tile schedule (int32), h [n_tokens * top_k, inter], then one region (from
// moe_experts_shared_scratch_offset, 256-byte aligned) for the per-pair down outputs
// [n_tokens * top_k, hidden] in f32, which the shared experts reuse once the routed sum is in
// out (or where no per-pair outputs are made): their [gate | up] rows [n_tokens, 2 shared_inter]
// at its start and the product [n_tokens, shared_inter] moe_experts_shared_h_offset bytes in,
// elements of at most 4 bytes.
inline int64_t moe_experts_shared_scratch_offset(int64_t n_tokens, int32_t top_k, int32_t n_experts, int64_t inter) {
  const int64_t pairs = n_tokens * top_k;
  auto up = [](int64_t b) { return (b + 255) / 256 * 256; };
  return up(4 * (2 * pairs + 2 * (pairs + n_experts) + 2 * (n_experts + 1) + 4)) + up(4 * pairs * inter);
}
inline int64_t moe_experts_shared_h_offset(int64_t n_tokens, int64_t shared_inter) {
  return (8 * n_tokens * shared_inter + 255) / 256 * 256;
}
inline int64_t moe_experts_scratch_bytes(int64_t n_tokens, int32_t top_k, int32_t n_experts, int64_t hidden, int64_t inter,
                                         int64_t shared_inter = 0) {
  const int64_t y = 4 * n_tokens * top_k * hidden,
                shared = moe_experts_shared_h_offset(n_tokens, shared_inter) + 4 * n_tokens * shared_inter;
  return moe_experts_shared_scratch_offset(n_tokens, top_k, n_experts, inter) + ((y > shared ? y : shared) + 255) / 256 * 256;
}

// Samples one token id per logits row on the device (see Backend::sample):
//   greedy      temperature[r] <= 0: argmax (lowest id on ties, as torch.argmax)
//   temperature softmax(logits / T) sampled by the Gumbel-max trick: argmax(z - log(-log u))
//   top-k       keep ids whose z is >= the k-th largest (ties at the boundary kept)
//   top-p       then keep the smallest head of that set holding >= p of its probability mass
// Randomness: u = splitmix64(seeds[r] ^ id * golden) mapped to (0, 1); the caller changes
// seeds[r] every step, which makes a request's samples independent of the rest of the batch.
// Every pointer is device memory, so a captured step samples with what was written there.
struct SampleParams {
  const void* logits;       // [n_rows, vocab] with row stride ld_logits (elements)
  DType logits_dtype;       // f32, f16 or bf16
  int64_t ld_logits;
  int32_t n_rows;
  int32_t vocab;
  const float* temperature; // [n_rows]
  const int32_t* top_k;     // [n_rows] or nullptr; <= 0 or >= vocab: off
  const float* top_p;       // [n_rows] or nullptr; <= 0 or >= 1: off
  const uint64_t* seeds;    // [n_rows]
  int32_t* out_ids;         // [n_rows]
};

}  // namespace frugal::ops
