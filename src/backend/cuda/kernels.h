// Launchers of the CUDA kernels: plain functions over the ops Params structs, so the .cu files
// see no STL or third-party types and the C++ backend (cuda_backend.cpp) sees no device code.
// Each launcher validates nothing the backend has not already checked, enqueues on `stream`
// and returns the launch error (cudaSuccess when enqueued).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/params.h"

namespace frugal::cuda {

// Programmatic dependent launch for every kernel below (see common.cuh); the backend turns it
// on for sm_90+ unless FRUGAL_PDL=0.
bool pdl_enabled();
void set_pdl_enabled(bool on);

// Elementwise and row ops (elementwise.cu). Activations may be f32, f16 or bf16.
cudaError_t launch_embedding(const ops::EmbeddingParams& p, cudaStream_t stream);
cudaError_t launch_rms_norm(const ops::RmsNormParams& p, cudaStream_t stream);
cudaError_t launch_rope(const ops::RopeParams& p, cudaStream_t stream);
cudaError_t launch_silu_mul(const ops::SiluMulParams& p, cudaStream_t stream);
cudaError_t launch_gather_rows(const ops::GatherRowsParams& p, cudaStream_t stream);
// The split GEMMs' epilogues (elementwise.cu): the op that reads a matmul's y, run over the
// matmul's f32 k-slice partials [splits][m][n] (launch_quant_gemm_partials) instead of after the
// reduce kernel: y made from the partials with the reduce's arithmetic (slice order, + bias, + y
// when accumulating, bf16), then the op's own, so the same bits as the reduce kernel then the op.
//  - split_rms_norm (matmul_rms_norm): norm.x is mm.y (no residual, ld_x ld_y, rows m, dim n); y
//    is written (the residual stream), then normalized into norm.y, one block a token.
//  - split_silu_mul (matmul_silu_mul): act reads the [gate | up] halves of mm.y; mm.y is not
//    written.
// The _ok functions say where the Params have that shape (bf16 y, n a multiple of 8).
bool split_rms_norm_ok(const ops::MatmulParams& mm, const ops::RmsNormParams& norm);
cudaError_t launch_split_rms_norm(const ops::MatmulParams& mm, const float* partials, int splits,
                                  const ops::RmsNormParams& norm, cudaStream_t stream);
//  - split_rope_kv_write (matmul_rope_kv_write): the model's [q | k | v] rows of mm.y (rope_kv_write's
//    layout, rope_kv_write_fusable); q's rotated rows are written back to y, k and v go to the
//    cache only.
bool split_rope_kv_write_ok(const ops::MatmulParams& mm, const ops::RopeKvWriteParams& p);
cudaError_t launch_split_rope_kv_write(const ops::MatmulParams& mm, const float* partials, int splits,
                                       const ops::RopeKvWriteParams& p, cudaStream_t stream);
bool split_silu_mul_ok(const ops::MatmulParams& mm, const ops::SiluMulParams& act);
cudaError_t launch_split_silu_mul(const ops::MatmulParams& mm, const float* partials, int splits,
                                  const ops::SiluMulParams& act, cudaStream_t stream);
cudaError_t launch_kv_write(const ops::KvWriteParams& p, cudaStream_t stream);
// The fused RoPE + KV write (rope_kv_write.cu): one kernel for the model's layout (kv.k is rope.k,
// bf16, rotate_half with rotary_dim % 4 == 0, head_dim <= 256, any kv_write cache dtype), equal bit
// for bit to launch_rope then launch_kv_write; rope_kv_write_fusable says whether p is such.
bool rope_kv_write_fusable(const ops::RopeKvWriteParams& p);
cudaError_t launch_rope_kv_write(const ops::RopeKvWriteParams& p, cudaStream_t stream);
// MLA's latent-row prologue (mla_prologue.cu): rms_norm, rope and kv_write of the fused op
// mla_kv_prologue in one kernel for the model's layout (mla_kv_prologue_fusable), bit for bit
// the three launches.
bool mla_kv_prologue_fusable(const ops::MlaKvPrologueParams& p);
cudaError_t launch_mla_kv_prologue(const ops::MlaKvPrologueParams& p, cudaStream_t stream);
// DeepSeek MoE routing and router-weight row scaling (moe.cu).
cudaError_t launch_moe_route(const ops::MoeRouteParams& p, cudaStream_t stream);
// The routing kernels' top-k up to 64 values: one pass of ranks (the default), or with
// FRUGAL_MOE_ROUTE_RANK=0 / set_moe_route_rank(0) the warp arg-max rounds, one an expert chosen
// (the only way past 64 values). Both choose the same experts in the same order. -1: the env's.
bool moe_route_rank();
void set_moe_route_rank(int on);
// moe_router in one launch (moe.cu): a cluster of 8 CTAs computes the router logits with the
// GEMV's arithmetic (bit-equal to launch_gemv, which the shape must take: gemv_supported, m <=
// kGemvMaxM, unsplit; moe_router_fusable) and CTA 0 routes from its shared memory; with_norm
// (moe_router_norm_fusable: bf16, no residual, rows * dim <= 4096) the input norm runs in it too,
// with rms_norm's bits. sm_90+ only (thread-block clusters). Without the norm the caller runs
// rms_norm first.
bool moe_router_fusable(const ops::MoeRouterParams& p);
bool moe_router_norm_fusable(const ops::MoeRouterParams& p);
cudaError_t launch_moe_router(const ops::MoeRouterParams& p, bool with_norm, cudaStream_t stream);
// moe_router's matmul and routing in one launch with no cluster (moe.cu; the norm is the
// caller's, before it; moe_router_fusable): the router rows spread over ceil(E / 4) blocks with
// the GEMV's arithmetic, and the last block to finish (a ticket from `counter`, one zeroed word
// the kernel leaves zero) routes every token from the logits.
cudaError_t launch_moe_router_grid(const ops::MoeRouterParams& p, uint32_t* counter, cudaStream_t stream);
cudaError_t launch_scale_rows(const ops::ScaleRowsParams& p, cudaStream_t stream);
// Routed experts over tokens grouped by expert, bf16 (moe_experts.cu, moe_stream.cu). The path
// goes by rows per routed expert on average (moe_experts_path; moe_experts.cu says more): GEMVs
// up to 4; the streaming "swap AB" kernels up to 64 (MoeStream::kDecode, the default; kAll: at
// every size; kOff: WMMA tiles instead); 64-row WMMA tiles above. The mma.sync kernels (slower
// on the H200) only where asked for: MoeMma::kDecode up to 64 rows, kAll at every size above 4.
// FRUGAL_MOE_STREAM=1 / all / 0 and FRUGAL_MOE_MMA=1 / all / 0 are read once; set_moe_stream and
// set_moe_mma override them (tests and benchmarks compare the paths).
cudaError_t launch_moe_experts(const ops::MoeExpertsParams& p, cudaStream_t stream);
enum class MoeMma { kOff, kDecode, kAll };
MoeMma moe_mma();
void set_moe_mma(MoeMma m);
enum class MoeStream { kOff, kDecode, kAll };
MoeStream moe_stream();
void set_moe_stream(MoeStream s);
// Quads (32 k, 1 KB of a 16-row tile) a warp of the streaming kernels loads an iteration, 2 or
// 4 (twice that in flight): FRUGAL_MOE_STREAM_U, default 4 (measured 2026-12-03: V2-Lite 256 tokens
// 318 us against 341 at 2, 512 tokens 419 against 484, 64 tokens equal); set_moe_stream_u (0: back to that).
int moe_stream_u();
void set_moe_stream_u(int u);
// Steps of at most moe_tiny_pairs() (token, expert) pairs (default kMoeTinyPairs; FRUGAL_MOE_TINY=n,
// 0 off, read once; set_moe_tiny_pairs overrides it, a negative value goes back to the variable
// or the default) take the tiny path before any of the above: two kernels, no permutation, the
// shared experts fused in where they are dense bf16 (moe_experts_fuses_shared). Elsewhere the
// backend adds the shared experts after launch_moe_experts with its own ops; launch_moe_experts
// itself adds them only where fused.
inline constexpr int kMoeTinyPairs = 16;
int moe_tiny_pairs();
void set_moe_tiny_pairs(int pairs);
// Whether the tiny path's kernels load their first round of shared-expert weights before the PDL
// wait (moe_tiny.cu): on by default (V2-Lite batch 1 412.9 against 400.1 / 401.0 tok/s, H200
// 2026-12-05), FRUGAL_MOE_TINY_EARLY=0 turns it off (read once; set_moe_tiny_early(0 | 1 | 2)
// overrides it, a negative value goes back to the variable). Level 2 (moe_tiny_early_routed):
// the down kernel also asks L2 for its routed pairs' down rows before the wait (opt-in: V2-Lite
// batch 1 352.0 against 365.1 tok/s, H100 2026-12-05, docs/perf/2026-12-05-session43.md).
bool moe_tiny_early();
bool moe_tiny_early_routed();
void set_moe_tiny_early(int level);
enum class MoePath { kTiny, kGemv, kStream, kMma, kWmma16, kWmma64 };
// Whether launch_moe_experts computes p's shared experts too (the tiny path, dense bf16 ones).
bool moe_experts_fuses_shared(const ops::MoeExpertsParams& p);
const char* moe_path_name(MoePath path);  // "tiny", "gemv", ... (tests, benchmarks)
// The expert GEMMs launch_moe_experts runs for p under the current switches.
MoePath moe_experts_path(const ops::MoeExpertsParams& p);
// Raises the mma.sync expert kernels' shared-memory limits outside any capture (where the device
// cannot give them their shared memory, the WMMA tiles run instead); the backend calls it once
// at creation.
cudaError_t prepare_moe_experts();
// MLA (mla.cu): batched GEMV for m <= kBatchedGemvMaxM; decode attention over the latent cache
// (one KV head, K == V, head_dim in (128, 640]), split over the context into
// mla_decode_scratch_bytes(p, splits) bytes of partials when splits > 1.
inline constexpr int kBatchedGemvMaxM = 16;
cudaError_t launch_batched_gemv(const ops::BatchedMatmulParams& p, cudaStream_t stream);
// The batched GEMV's variant (A/B runs; read from FRUGAL_BATCHED_GEMV at first use, set between
// launches by tests and benchmarks): 1 (default) two 16-byte chunks of a row in flight a lane
// for k > 256 and 2-4 rows a warp past ~4K rows in all, 0 (FRUGAL_BATCHED_GEMV=orig) one row a
// warp, one chunk at a time. The same bits either way.
int batched_gemv_mode();
void set_batched_gemv_mode(int mode);
// Whether the batched GEMV (and the fused merge + W_UV, and the prologue + absorb launch) loads
// its first round of weight chunks before the PDL wait: on unless FRUGAL_BATCHED_GEMV_EARLY=0 or
// set_batched_gemv_early(false) (measured neither faster nor slower; A/B runs, tests; the same
// bits either way).
// launch_batched_gemv's contract: p.w is weights, which no kernel writes; x and y are touched
// only after the wait.
bool batched_gemv_early();
void set_batched_gemv_early(bool on);
bool mla_decode_supported(const ops::AttentionParams& p);
int mla_decode_splits(const ops::AttentionParams& p, int n_sms);
size_t mla_decode_scratch_bytes(const ops::AttentionParams& p, int splits);
// counters: kDecodeCounters zeroed words (the backend's decode counters; left zero) or nullptr.
// With them (and mla_decode_fuses_combine) the last split block of each (token, group of 16
// heads) merges the splits, the same bits as the combine kernel that runs otherwise.
cudaError_t launch_mla_decode(const ops::AttentionParams& p, int splits, void* partials, uint32_t* counters,
                              cudaStream_t stream);
// Whether launch_mla_decode(p, splits, _, counters) merges in its last blocks: splits > 1,
// counters non-null, n_tokens x head groups <= kDecodeCounters, and by mla_merge_mode():
// kAuto (FRUGAL_MLA_FUSED_COMBINE=auto) while a merging block's partial rows (splits x
// min(n_head, 16) x head_dim floats) are at most kMlaFusedMergeMaxBytes, kFused always (=always),
// kCombineKernel never (the default: measured faster, see mla_merge_mode). Process-wide; tests and benchmarks set it between launches.
enum class MlaMerge : int { kCombineKernel = 0, kAuto = 1, kFused = 2 };
inline constexpr int64_t kMlaFusedMergeMaxBytes = 256 << 10;
bool mla_decode_fuses_combine(const ops::AttentionParams& p, int splits, const uint32_t* counters);
// attention_batched_matmul for MLA (W_UV after the latent attention): the decode kernel's splits
// (partials, never merged by its last blocks) then one kernel that merges each (token, head)'s
// splits and runs the per-head matmul on them, the combine kernel's and the batched GEMV's bits,
// without writing p.out. Where mla_combine_uv_fusable(p, mm, splits): mm reads p.out's rows as
// the model lays them (x = out, a head a batch entry, k <= head_dim) at the GEMV's m, splits > 1.
bool mla_combine_uv_fusable(const ops::AttentionParams& p, const ops::BatchedMatmulParams& mm, int splits);
// mla_attention's mla_kv_prologue(prologue) and batched_matmul(absorb) in one launch, where the
// Params promise absorb_rope_identity (ops/params.h) at the batched GEMV's m <= 4 on the fused
// prologue's layout (mla_kv_prologue_fusable): blocks of the prologue (one a token) copy each q
// head's rotated q_pe into absorb.y's last rotary_dim values, beside blocks of the GEMV over the
// first rows and the nope columns, which read only q's nope part; no block waits for another.
// The sequence's values (the GEMV's arithmetic, its zero columns left out).
bool mla_prologue_absorb_fusable(const ops::MlaAttentionParams& p);
cudaError_t launch_mla_prologue_absorb(const ops::MlaAttentionParams& p, cudaStream_t stream);
cudaError_t launch_mla_decode_uv(const ops::AttentionParams& p, int splits, void* partials, const ops::BatchedMatmulParams& mm,
                                 cudaStream_t stream);
MlaMerge mla_merge_mode();
void set_mla_merge_mode(MlaMerge m);
// MLA's whole attention part for one decode token (the fused op mla_attention) in one persistent
// kernel (mla_attention.cu): one block an SM, grid-wide barriers between its steps. The plan says
// whether it applies (bf16, dense weights, the model's data flow, one block of plan.smem fits an
// SM, and switched on: FRUGAL_FUSE_MLA_ATTN=1 or set_mla_attention_enabled(true); off by default,
// measured slower) and what it needs: plan.scratch_bytes of partials and `sync`, a
// 64-bit counter zeroed once (every launch leaves it at a multiple of its grid).
struct MlaAttentionPlan {
  bool applies = false;
  int grid = 0, splits = 0, q_rows = 0, o_rows = 0, abs_rows = 0, uv_rows = 0, nope = 0;
  int64_t region_a = 0;
  size_t smem = 0, scratch_bytes = 0;
};
bool mla_attention_enabled();
void set_mla_attention_enabled(bool on);
// Raises the kernel's shared-memory limit to max_smem, once before any graph capture (the backend's
// creation); plans need at most that.
cudaError_t prepare_mla_attention(size_t max_smem);
MlaAttentionPlan plan_mla_attention(const ops::MlaAttentionParams& p, int n_sms, size_t max_smem);
// stamps (a diagnostic; nullptr: none): [stamp_slots][plan.grid][kMlaAttnStamps] u64, where each
// launch's thread 0 of every block writes %globaltimer (ns) at: 0 its start, 1 the PDL wait's end,
// 2 / 3 the first barrier's arrival (the block's slowest warp done) / leaving, 4 / 5, 6 / 7, 8 / 9
// the other three, 10 its end; 11 holds the launch's index (from `sync`: launches numbered from
// the counter's zero), and the launch goes to slot index % stamp_slots.
constexpr int kMlaAttnStamps = 12;
cudaError_t launch_mla_attention(const ops::MlaAttentionParams& p, const MlaAttentionPlan& plan, void* partials,
                                 unsigned long long* sync, cudaStream_t stream, unsigned long long* stamps = nullptr,
                                 int stamp_slots = 0);
// The steps of the launches in `stamps` (as above, read back; grid blocks a launch; a slot whose
// blocks disagree on the launch index (stamp 11), was never written (zeros) or holds stamps out of
// order is left out), medians over the launches in microseconds. Each step runs from the previous barrier's release (the last block to
// leave it; the PDL wait's end of the last block for step 1) to the last block's arrival at its
// own barrier; `spread` is the last arrival less the first; `barrier` the last leaving less the
// last arrival. Step 5 ends at the last block's end.
struct MlaAttnStampSummary {
  int launches = 0;
  double start_spread = 0, wait = 0;  // the blocks' starts (last - first); the last PDL wait's end less the first start
  double step[5] = {}, spread[5] = {}, barrier[4] = {};
  double after_wait = 0;              // the last PDL wait's end to the last block's end
  double tick_ns = 0;                 // the smallest nonzero difference seen between two stamps (the timer's step, at most)
};
MlaAttnStampSummary summarize_mla_attention_stamps(const unsigned long long* stamps, int stamp_slots, int grid);
// The MLA kernel's tensor-core variant (mma.sync, head_dim 576, bf16): mla_decode_splits /
// launch_mla_decode take it whenever mla_decode_mma_applies(p); on unless FRUGAL_MLA_MMA=0 or
// set_mla_mma_enabled(false) (the CUDA-core kernel stays the A/B baseline for tests and benchmarks).
// FRUGAL_MLA_SPLITS=n forces mla_decode_splits to n (1..64) for tuning runs.
bool mla_mma_enabled();
void set_mla_mma_enabled(bool on);
// Whether the tensor-core MLA kernel copies its split's first tiles of older cache rows (those no
// kernel of this step writes) before the PDL wait: on unless FRUGAL_MLA_EARLY=0 or
// set_mla_decode_early(false) (A/B runs, tests; the same bits either way).
bool mla_decode_early();
void set_mla_decode_early(bool on);
bool mla_decode_mma_applies(const ops::AttentionParams& p);
cudaError_t prepare_mla_decode();
// y[i, :] += bias (used after a GEMM that could not fuse the bias).
cudaError_t launch_bias_add(void* y, DType y_dtype, int64_t ld_y, const void* bias, DType bias_dtype,
                            int64_t m, int64_t n, cudaStream_t stream);

// Fills n elements with uniform values in [lo, hi) from a counter hash of (seed, index):
// dummy weights and benchmark inputs made on the device (never all zeros).
cudaError_t launch_fill_uniform(void* dst, DType t, int64_t n, uint64_t seed, float lo, float hi,
                                cudaStream_t stream);

// SwiGLU's gate_up projection with silu_mul in the GEMVs' epilogue (the fused op matmul_silu_mul):
// the weight's rows [0, n / 2) are the gates and [n / 2, n) the ups; instead of y the kernel
// writes out[t, c] = silu(g) * u (g, u: the outputs rounded to y_dtype, as y would hold them;
// out in y_dtype, row stride ld_out), bit-equal to the GEMV then silu_mul. n even, no accumulate.
struct SiluMulOut {
  void* out = nullptr;
  int64_t ld_out = 0;
};
// Small-batch GEMV (gemv.cu): m in [1, kGemvMaxM], x bf16, w dense bf16, y bf16 or f32, bias optional.
// Needs k % 8 == 0, ld_x % 8 == 0 and 16-byte aligned x and w (gemv_supported says whether).
constexpr int64_t kGemvMaxM = 8;
bool gemv_supported(const ops::MatmulParams& p);
// The first round of weight loads is issued before the programmatic-dependent-launch wait, so
// the weights must not be written by the kernel launched just before on the stream (they never
// are: weights come from the host); x, bias and y are read after it.
cudaError_t launch_gemv(const ops::MatmulParams& p, cudaStream_t stream, const SiluMulOut* silu = nullptr);
// rms_norm_matmul at m = 1 in one GEMV (gemv.cu): every block normalizes the row into shared
// memory in rms_norm_bf16_kernel's order (block 0 also writes norm.y), then the early-load GEMV
// runs over it: the same bits as rms_norm then launch_gemv, one launch fewer. Fusable: bf16, no
// residual, dim <= 4096, norm.y not overlapping norm.x, a shape the m = 1 GEMV does not split.
bool rms_norm_gemv_fusable(const ops::RmsNormMatmulParams& p);
cudaError_t launch_rms_norm_gemv(const ops::RmsNormMatmulParams& p, cudaStream_t stream);
// Warps splitting each row's k for this shape (1, 2, 4; gemv.cu's split_k, the same for every m).
int gemv_split_k(int64_t n, int64_t k);
// A/B and test knobs, -1 = the default (env FRUGAL_GEMV_SPLITK, FRUGAL_GEMV_EARLY): `split` 0 | 1
// keeps the unsplit kernel, 2 | 4 forces that split on every shape; `early` the weight loads
// before the PDL wait at m = 1: 0 never, 1 on the small-matrix path (qkv, o; the default), 2 also
// on the unsplit wide path (gate_up, lm_head; split kernels never).
void set_gemv_tuning(int split, int early);
// Any-dtype, any-shape matmul with dense weights: the slow but general path (one warp per output).
cudaError_t launch_matmul_generic(const ops::MatmulParams& p, cudaStream_t stream);
// Quantized weights (int8, int4, nf4, fp8; quant_matmul.cu): the correctness path, any m, n, k,
// any activation dtype; one warp per output decoding weights on the fly.
cudaError_t launch_matmul_quant(const ops::MatmulParams& p, cudaStream_t stream);
// The weight-only quantized GEMV (quant_gemv.cu): int4 / int8 / fp8 without act order, bf16 x,
// group_k 0 or a multiple of 128 (int4) / 64 (8-bit), k % 8 == 0, ld_x % 8 == 0, 16-byte aligned x
// and codes; any m (one pass over the weight per 8 tokens), so meant for m <= kQuantGemvMaxM.
constexpr int64_t kQuantGemvMaxM = 64;
// FP8 weights W8A8 takes (per tensor / channel / 128 x 128 blocks, sm_90) leave the GEMV above 8
// tokens: cuBLASLt's FP8 GEMM reads the weight once for all of them (measured 2026-12-03, 7B
// decode: B=16 2,927 vs 2,846 tok/s, B=64 9,355 vs 3,948 tok/s through the GEMV).
constexpr int64_t kFp8GemvMaxM = 8;
bool quant_gemv_supported(const ops::MatmulParams& p);
// Benchmark knob at m <= 8: quads per warp iteration (1 | 2 | 4; the next iteration's are in flight
// meanwhile) and warps per row tile (4 | 8); 0 = the default rule.
void set_quant_gemv_tuning(int quads_per_iteration, int warps);
// The lean GEMV's shared-memory ring (quant_gemv.cu): its codes copied by cp.async through a
// ring of 3 or 5 quads a warp instead of registers (depth >= 5: 5; 1..4: 3; 0: the registers).
// FRUGAL_QGEMV_RING=<depth> or set_quant_gemv_ring (-1: back to the environment's, else the default).
// gemv_class: 1 the fused gate/up (silu epilogue), 2 k > n (down), 4 the rest (q/k/v, o); the
// classes FRUGAL_QGEMV_RING_ON (a mask, default 7: all) names take the ring, the others the
// registers. The default depth: 3 for int4 and int8, 0 for fp8.
int quant_gemv_ring_depth(bool fp8, int gemv_class);
void set_quant_gemv_ring(int depth);
// The lean GEMV's early start: its first quads' codes requested before pdl_wait(), under the
// previous kernel's tail (the bf16 GEMV's small-matrix path does the same). FRUGAL_QGEMV_EARLY=0|1
// (default 1) or set_quant_gemv_early (-1: back to the environment's).
bool quant_gemv_early();
void set_quant_gemv_early(int early);
// The lean GEMV's L2 request: at its start each block asks L2 for the first `bytes` of each of its
// 16 rows (capped at the row; one bulk prefetch a row, sm_90) and for their scale lines, before the
// PDL wait, so the loop's loads find in L2 what DRAM is already streaming. 0: off (the default:
// measured slower at every size, 7B int4 batch 1 306 against 344 tok/s with whole rows, H100
// 2026-12-05; the GEMV is bound by its instruction issue and latency, not by bytes in flight).
// FRUGAL_QGEMV_L2=<bytes> or set_quant_gemv_l2 (-1: back to the environment's).
int quant_gemv_l2();
void set_quant_gemv_l2(int bytes);
// Which kernel runs the GEMV at m <= 8: kTile (quant_gemv.cu: codes in flight in registers, a
// warp's quad or two), kLean (quant_gemv.cu: the tile kernel's math and bits with the bookkeeping
// taken out of its loop: no bounds checks or 64-bit index math on the quads that lie wholly inside
// k, code and scale loads ping-ponged between two register sets, x rows clamped instead of
// branched; the quads at the end of k take the tile kernel's checked path) or kBulk
// (quant_gemv_bulk.cu, sm_90: a producer warp streams each row tile through a shared-memory ring
// by TMA bulk copies, consumer warps do the same math). FRUGAL_QGEMV_KERNEL=tile|lean|bulk or
// set_quant_gemv_kernel (kDefault: back to the environment's, else kLean); kBulk falls back to
// the tile/lean choice before sm_90. kBulk measured slower than kTile in every format (H200,
// 2026-12-05, docs/perf/2026-12-05-session39.md): kept for A/B. kLean is the default: the same
// bits as kTile, int4 gate at m = 1 20.0 us against 21.1 and 7B int4 batch 1 +1.6% (H100,
// docs/perf/2026-12-05-session41.md); kTile stays for A/B.
enum class QuantGemvKernel { kDefault, kTile, kBulk, kLean };
void set_quant_gemv_kernel(QuantGemvKernel k);
// The kernel a call asks for: `over` unless kDefault, else set_quant_gemv_kernel's, else
// FRUGAL_QGEMV_KERNEL's, else kLean.
QuantGemvKernel quant_gemv_kernel_choice(QuantGemvKernel over = QuantGemvKernel::kDefault);
// Whether launch_quant_gemv runs this call through the bulk kernel (asked for, m <= 8, sm_90+);
// `over` (a backend's own choice, CudaBackend::set_quant_gemv) wins unless kDefault.
bool quant_gemv_bulk_ok(const ops::MatmulParams& p, QuantGemvKernel over = QuantGemvKernel::kDefault);
// With `silu` (m <= 8): SwiGLU's gate_up epilogue, as launch_gemv's; `over` as quant_gemv_bulk_ok's.
cudaError_t launch_quant_gemv(const ops::MatmulParams& p, cudaStream_t stream, const SiluMulOut* silu = nullptr,
                              QuantGemvKernel over = QuantGemvKernel::kDefault);
// Re-lays n rows of int4 / int8 codes (row_bytes each) from row-major into kOutInTiles8
// (ops/weight_format.h) in place, through `tmp` (tmp_bytes, a multiple of 8 row_bytes; the
// codes pass through it in slices of whole tiles). The GEMVs, the slab GEMM, the dequantization
// and the correctness kernel read the result when the weight's format says kOutInTiles8.
// n % 8 == 0 and row_bytes % 64 == 0 (cudaErrorInvalidValue otherwise).
cudaError_t launch_quant_tiles8_relayout(void* codes, int64_t n, int64_t row_bytes, void* tmp, size_t tmp_bytes,
                                        cudaStream_t stream);
// The bulk GEMV's shape (0: the default rule): consumer warps (4 | 8), ring stages (1..8) and
// resident blocks an SM at most; also FRUGAL_QBULK_W / FRUGAL_QBULK_STAGES / FRUGAL_QBULK_BLOCKS.
void set_quant_gemv_bulk_tuning(int warps, int stages, int blocks_per_sm);
// The quantized GEMM for quant_gemm_min_m() <= m <= kQuantGemvMaxM, same formats as the GEMV,
// in three kernels (quant_gemm_kernel()):
//  - kPipe (quant_gemm_pipe.cu, kept for A/B: measured slower, see below): codes, x slab and scales of each quad staged in
//    shared memory by a 4-5 stage cp.async pipeline, W warps x R row tiles of 16 rows sharing
//    the x slab, the sums of x for int4's bias and zero points computed once per block; the
//    blocks split the (row block, quad) units evenly (stream-K), tiles shared by two blocks go
//    to f32 partials added by a second kernel. quant_gemm_splits returns 1 (one block per
//    tile, no partials) or the number of blocks.
//  - kQuad (quant_gemv.cu, kept for A/B): one quad in flight per block,
//    double-buffered; k split over grid.z; quant_gemm_splits returns the splits of k.
//  - kSlab (quant_gemm_slab.cu, the default from 9 tokens: int4 gate 18944 x 3584 at m 16 / 32 /
//    64 32.9 / 45.8 / 72.0 us against the GEMV's 39.1 / 64.3 / 100.6 and the one-quad GEMM's 99.6
//    at 64; 7B int4 decode at 16 / 64 sequences 3,324 / 6,662 tok/s against 2,821 / 5,328; H200,
//    2026-12-05; at m <= 8 the GEMV stays, 21.1 against 22.1 us at m 1): a block stages the x of a
//    whole k slice in shared memory once, then its 8 warps stream the codes of many row groups
//    over it U quads deep with no further barrier; k slices over grid.z (quant_gemm_splits
//    returns them), f32 partials added in slice order. One split runs the GEMV where the
//    whole k does not fit. set_quant_gemm_tuning(u, r) / FRUGAL_QGEMM_W=u, FRUGAL_QGEMM_R=r
//    pick quads per warp iteration and row tiles per warp: (2, 1) or (4, 1) up to 16 tokens,
//    (1, 2) or (2, 1) above (the first of each the default); FRUGAL_QSLAB_SMEM_KB caps a slice.
//    set_quant_slab_limits(blocks, smem_kb) (tests, benchmarks; 0: the default) sizes the grid
//    for `blocks` resident blocks instead of the occupancy (1: one row band, every warp many
//    row groups) and caps a slice's shared memory (8: a quad or two per slice, many slices).
//    int4 codes from 12 tokens on sm_90a take its warpgroup kernel (quant_gemm_wg.cu,
//    set_quant_slab_wg below): the same slices and partials, wgmma instead of mma.sync (7B int4
//    at 16 / 32 / 40 / 64 sequences +7% / +16% / +21% / +26%, H100, 2026-12-06 / 07).
// Either way quant_gemm_scratch_bytes(p, splits) bytes of device memory hold the partials when
// splits > 1, and launch_quant_gemm(p, 1, nullptr) needs none (what a capture without scratch
// runs). FRUGAL_QGEMM_KERNEL=slab|quad|pipe or set_quant_gemm_kernel picks the kernel;
// FRUGAL_QGEMM_MIN_M (0: never) or set_quant_gemm_min_m (-1: back to the default) the threshold;
// FRUGAL_QGEMM_W=4|8, FRUGAL_QGEMM_R=1|2 or set_quant_gemm_tuning(warps, row_tiles) (0: the
// default) the block shape (kQuad: 4 x 1, 8 x 1, 4 x 2; kPipe: 4 x 2, 8 x 1, 8 x 2);
// FRUGAL_QGEMM_UNITS the fewest quads per kPipe block (default 4).
// Thresholds: kQuad from 33 tokens (measured 2026-12-03, int4 7B: it wins at m = 64, e.g. q
// 23.4 us against the GEMV's 40.7, and loses at 16 and 32, gate 51.0 / 65.5 us against 38.8 /
// 62.7; its one-quad pipeline leaves each block waiting on a slab per quad); kPipe from 9. kPipe
// was predicted bandwidth-bound at m = 16 (gate ~12 us) and measured 48-50 us there and 127-137
// us at m = 64 (kQuad 4 x 2: 106), int4 decode at B = 16 / 64 2,340 / 3,666 tok/s against
// 3,011 / 5,281 (H200, 2026-12-03): staging the codes through shared memory with one barrier per
// quad costs more than the deeper pipeline saves.
constexpr int64_t kQuantGemmMinM = 33;
constexpr int64_t kQuantGemmPipeMinM = 9;
constexpr int64_t kQuantGemmSlabMinM = 9;
// `over` (a backend's own choice, CudaBackend::set_quant_gemm; kDefault: none) wins over the
// process-wide set_quant_gemm_kernel / FRUGAL_QGEMM_KERNEL, and `over_min_m` (>= 0) over
// set_quant_gemm_min_m / FRUGAL_QGEMM_MIN_M.
enum class QuantGemmKernel { kDefault, kQuad, kPipe, kSlab };
void set_quant_slab_limits(int blocks, int smem_kb);
// The slab GEMM's mma chains a token tile's quad accumulates in: 2 (the default since 2026-12-05:
// even and odd steps apart, then added; shorter dependency chains, other f32 rounding within the
// same bound; 7B int4 at 16 / 64 sequences +2.3% / +3.0% on an H100) or 1.
// FRUGAL_QSLAB_CHAINS=1|2 or set_quant_slab_chains (0: back to the environment's).
void set_quant_slab_chains(int chains);
// The slab GEMM's warpgroup kernel (quant_gemm_wg.cu): int4 codes on sm_90a from 12 tokens by
// default, one wgmma.mma_async a k16 step of a 64-row group and 16 / 32 / 48 / 64 tokens, x in
// shared memory in the codes' k order. FRUGAL_QSLAB_WG=0|1 or set_quant_slab_wg (1 on, 0 off;
// -1: back to the environment's, default on); FRUGAL_QSLAB_WG_MIN or min_m (0: the environment's,
// else 12) makes it take every m from that many tokens.
void set_quant_slab_wg(int on, int min_m = 0);
QuantGemmKernel quant_gemm_kernel(QuantGemmKernel over = QuantGemmKernel::kDefault);
void set_quant_gemm_kernel(QuantGemmKernel k);  // kDefault: FRUGAL_QGEMM_KERNEL, else kSlab
int64_t quant_gemm_min_m(QuantGemmKernel over = QuantGemmKernel::kDefault, int over_min_m = -1);
void set_quant_gemm_min_m(int m);
void set_quant_gemm_tuning(int warps, int row_tiles);
int quant_gemm_splits(const ops::MatmulParams& p, int n_sms, QuantGemmKernel over = QuantGemmKernel::kDefault);
size_t quant_gemm_scratch_bytes(const ops::MatmulParams& p, int splits, QuantGemmKernel over = QuantGemmKernel::kDefault);
cudaError_t launch_quant_gemm(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                              QuantGemmKernel over = QuantGemmKernel::kDefault);
// The slab GEMM's k slices into `partials` ([splits][m][n] f32, quant_gemm_scratch_bytes) without
// the reduce kernel, for a split epilogue (above) to add them; splits > 1. quant_gemm_partials_ok:
// whether p's GEMM is the slab one (the only GEMM whose partials have that layout).
bool quant_gemm_partials_ok(const ops::MatmulParams& p, QuantGemmKernel over = QuantGemmKernel::kDefault);
cudaError_t launch_quant_gemm_partials(const ops::MatmulParams& p, int splits, void* partials, cudaStream_t stream,
                                       QuantGemmKernel over = QuantGemmKernel::kDefault);
// Raises the kPipe (or kSlab) kernels' shared-memory limits and caches their occupancy outside
// any capture; the backend calls it once at creation.
cudaError_t prepare_quant_gemm();
cudaError_t prepare_quant_gemm_slab();  // the same for the slab GEMM alone
// Dequantizes an n x k quantized weight into dense bf16 [n][k] in the original input order
// (act order undone): the large-m path feeds it to cuBLASLt.
cudaError_t launch_dequant_bf16(const ops::WeightView& w, int64_t n, int64_t k, void* out, cudaStream_t stream);
// FP8 W8A8 operands (fp8_act.cu) for cuBLASLt's FP8 GEMM. Activations x [m][ld_x] -> E4M3 codes
// xq [m][k_pad] (zero past k) with dynamic scales x ~= xq * scale: per token (xs [m]) or per
// token and 128 inputs (xs [ceil(k_pad / 128)][ld_s], token fastest, ld_s >= m).
cudaError_t launch_quantize_fp8_act(const void* x, DType x_dtype, int64_t ld_x, int64_t m, int64_t k, int64_t k_pad,
                                    bool per_128, uint8_t* xq, float* xs, int64_t ld_s, cudaStream_t stream);
// The same from silu(gate) * up (bf16 rows; silu_mul_matmul): the codes and scales of silu_mul's
// bf16 product, which is never written. 16-byte aligned rows, k % 8 == 0 and per-token rows of
// at most 32,768 inputs; cudaErrorNotSupported otherwise (nothing launched).
struct FusedSiluQuant {
  const void* gate;
  const void* up;
  int64_t ld_gate, ld_up;
};
cudaError_t launch_quantize_fp8_silu(const FusedSiluQuant& f, int64_t m, int64_t k, int64_t k_pad, bool per_128,
                                     uint8_t* xq, float* xs, int64_t ld_s, cudaStream_t stream);
// The same from rms_norm(n) (rms_norm_matmul): the codes and scales of the norm's bf16 output,
// which is never written. bf16, no residual, rows of at most 4096, 16-byte aligned rows with
// k_pad >= n.dim; cudaErrorNotSupported otherwise (nothing launched).
cudaError_t launch_quantize_fp8_norm(const ops::RmsNormParams& n, int64_t k_pad, bool per_128, uint8_t* xq, float* xs,
                                     int64_t ld_s, cudaStream_t stream);
// out [rows][ld_out] = s [rows][cols] zero-padded to ld_out columns, or s[0] everywhere (broadcast).
cudaError_t launch_fp8_weight_scales(const float* s, int64_t rows, int64_t cols, int64_t ld_out, bool broadcast,
                                     float* out, cudaStream_t stream);

// Attention over the paged cache (attention_prefill.cu, attention_decode.cu).
// Prefill: FlashAttention-2 with mma.sync bf16 tensor cores; bf16 q/cache, head_dim 64 or 128.
bool attention_prefill_supported(const ops::AttentionParams& p);
// Splits along the keys for long contexts with few query tiles (1 = none); partials must hold
// attention_prefill_scratch_bytes(p, n_splits) bytes when n_splits > 1. On unless
// FRUGAL_PREFILL_SPLIT=0 or set_prefill_split_enabled(false) (tests compare both paths).
int attention_prefill_splits(const ops::AttentionParams& p, int n_sms);
bool prefill_split_enabled();
void set_prefill_split_enabled(bool on);
size_t attention_prefill_scratch_bytes(const ops::AttentionParams& p, int n_splits);
// The prefill kernel's wgmma variant (sm_90a): used when the backend's device is compute
// capability 9.0 and this build holds sm_90a code (set_prefill_wgmma_device, at backend creation),
// unless FRUGAL_PREFILL_WGMMA=0 or set_prefill_wgmma_enabled(false) (tests and benchmarks compare).
void set_prefill_wgmma_device(int cc_major, int cc_minor);
bool prefill_wgmma_enabled();
void set_prefill_wgmma_enabled(bool on);
// The FlashAttention-3-style prefill kernel (attention_prefill_fa3.cu: warp-specialised
// producer / two consumers, 128 x 128 tiles, sm_90a): launch_attention_prefill takes it when
// attention_prefill_fa3_applies(p, n_splits): mode on, a 9.0 device with sm_90a code (as the
// wgmma variant), bf16 cache, head_dim 128, no sliding window, one split. Mode: 0 off, 1 on
// (the default), 2 on with the consumers' GEMMs in ping-pong; FRUGAL_PREFILL_FA3=0|1|2
// read at first use, set_prefill_fa3_mode for tests and benchmarks (same threading rule).
int prefill_fa3_mode();
void set_prefill_fa3_mode(int mode);
bool attention_prefill_fa3_applies(const ops::AttentionParams& p, int n_splits);
cudaError_t launch_attention_prefill_fa3(const ops::AttentionParams& p, bool ping_pong, cudaStream_t stream);
cudaError_t launch_attention_prefill(const ops::AttentionParams& p, int n_splits, void* partials, cudaStream_t stream);
// Merges per-split partials ([n_tokens, n_head, n_splits, D] unnormalized outputs and
// (max in log2 units, sum) pairs) into p.out; shared by the split decode and prefill kernels.
cudaError_t launch_attention_combine(const ops::AttentionParams& p, int n_splits, float* part_o, float2* part_ml,
                                     cudaStream_t stream);
// Decode: split-KV (FlashDecoding) partials then a combine. Correct for any n_q per sequence,
// fast when it is 1. partials must hold attention_decode_scratch_bytes(p) bytes.
int attention_decode_splits(const ops::AttentionParams& p, int n_sms);
size_t attention_decode_scratch_bytes(const ops::AttentionParams& p, int n_splits);
bool attention_decode_supported(const ops::AttentionParams& p);
// Configures the decode kernels (shared-memory limits, cached occupancy) outside any capture;
// the backend calls it once at creation.
cudaError_t prepare_attention_decode();
// counters: kDecodeCounters zeroed words owned by the caller (the backend zeroes them once; the
// kernels leave them zero), or nullptr. With them, a split launch may merge its splits in the
// last block of each (token, head unit) instead of a separate combine launch (decode_combine.cuh).
constexpr int kDecodeCounters = 1 << 16;
// n_sms: the device's SMs, as given to attention_decode_splits (the tensor-core kernel's stage
// count depends on how many of them the launch's blocks fill).
cudaError_t launch_attention_decode(const ops::AttentionParams& p, int n_splits, void* partials, uint32_t* counters,
                                    cudaStream_t stream, int n_sms);
// Knobs of the decode kernels, for A/B runs on the GPU (process-wide; read from the environment
// at first use; tests and benchmarks set them between launches on one thread):
//   mma_stages (FRUGAL_DECODE_MMA_STAGES): cp.async stages per warp of the tensor-core kernel,
//     2 (the original), 3 or 4; 0 = auto: 3 for a bf16 cache when the launch has at most
//     kDecodeDeepMaxUnits (sequence, kv head) units (long-context decode of a few sequences);
//     for a larger bf16 batch 3 stages of 8 warps where its blocks fit one an SM, else the
//     deepest of 4 / 3 whose residency holds all its blocks in one wave
//     (attention_decode_mma_shape); else 2.
//   combine (FRUGAL_DECODE_COMBINE = sliced | separate | auto | fused): how split partials are
//     merged: sliced (default) launches the combine kernel with one block per (token, head, 32
//     dims) (4x the blocks at head_dim 128: 1 x 28 heads was 28 blocks, latency bound; 1 x 32k
//     on the H200: 29.7 -> 29.4 us with the decode kernel, 208.9 -> 210.3 tok/s end to end);
//     separate (the original) with one block per (token, head); both give the same bits (the
//     same splits in the same order for every output element; prefill's split combine takes
//     the same kernel); auto fuses the merge into
//     the last split block when it reads at most kFusedCombineAutoBytes of partial rows per
//     block; fused merges in the last block whenever the counters fit. The fused merge measured
//     slower everywhere on the H200 (1 x 256 7.8 -> 9.6 us, 32 x 2048 53.8 -> 56.9, 1 x 32k
//     29.5 -> 39.7): one block merging all splits serializes what the combine kernel spreads.
//   split_grain (FRUGAL_DECODE_SPLIT_GRAIN = warp | block): a sequence's chunk is rounded up to
//     a warp's keys per iteration (warp, default: every split but the last holds keys) or to the
//     block's (block, the original: 32k keys over 99 splits left 13 splits empty).
//   splits (FRUGAL_DECODE_SPLITS): > 0 forces the split count (benchmark sweeps), 0 = auto.
//   table_prefetch (FRUGAL_DECODE_TABLE_PREFETCH = 1 | 0, default 0): the tensor-core kernel
//     prefetches the block-table lines of its split's keys into L1 at its start, so the
//     per-iteration slot lookups (one table entry a warp iteration at block size 16, loaded one
//     iteration ahead) hit L1 instead of waiting on L2 behind the K/V stream. Values unchanged.
//   l2_prefetch (FRUGAL_DECODE_L2_PREFETCH = 1 | 0, default 0): the tensor-core kernel's K/V
//     copies carry the .L2::256B hint (.L2::128B for 128-byte rows), so L2 fetches each
//     gathered row from DRAM as one request, as the GEMVs' streamed loads do. Values unchanged.
// DecodeTuning::original() is the path before these knobs (2 stages, separate combine, block grain).
struct DecodeTuning {
  enum Combine { kAuto = 0, kSeparate = 1, kFused = 2, kSliced = 3 };
  int mma_stages = 0;
  int combine = kSliced;
  bool warp_grain = true;
  int splits = 0;
  bool table_prefetch = false;
  bool l2_prefetch = false;
  // (sequence, KV head) units from which each runs whole in one block, split only past
  // kMaxChunkKeys (decode_whole_units: -1 the default, 0 never, as before 2026-12-06).
  int whole_units = -1;
  // Warps a tensor-core decode block (FRUGAL_DECODE_MMA_WARPS = 4 | 8; 0 = auto: 8 for a bf16
  // batch whose blocks all fit one a SM at 3 stages, else 4): 8 gives each (sequence, kv head)
  // block twice the warps over the same keys, merged in shared memory (no split, no combine);
  // with 2 or 3 stages.
  int mma_warps = 0;
  static DecodeTuning original() { return {2, kSeparate, false, 0, false, false, 0}; }
};
constexpr size_t kFusedCombineAutoBytes = 128 << 10;
constexpr int kFusedCombineMaxSplits = 512;  // the merge's weights live in shared memory
constexpr int kDecodeDeepMaxUnits = 32;
DecodeTuning decode_tuning();
// The units (DecodeTuning::whole_units) from which a decode launch gives each unit one block
// and no split up to kMaxChunkKeys keys: decode_tuning()'s value, or by default a quarter of the
// SMs. Measured (H100, 2026-12-06, 7B at 16 / 64 sequences of ~544 keys): the split launches'
// combine cost more than the idle SMs (1 split +6.4% / +8.7% int4, +4.2% / +12.7% bf16 end to
// end, against 7 / 2 splits).
int decode_whole_units(int n_sms);
// The decode split count both decode kernels use (DecodeTuning::splits if forced; else the wave
// rule at `occupancy` resident blocks an SM below decode_whole_units units, one split from
// there; at least ceil(max_ctx_len / 1024), at most one split per kpi keys and 4096).
int decode_split_count(const ops::AttentionParams& p, int n_sms, int64_t units, int kpi, int occupancy);
void set_decode_tuning(const DecodeTuning& t);
// The decode kernels' tensor-core variant (attention_decode_mma.cu): a kv head's 2..16 query
// heads as the rows of mma.sync tiles. attention_decode_splits / launch_attention_decode take it
// whenever attention_decode_mma_applies(p) (which also needs attention_decode_supported(p)); on
// unless FRUGAL_DECODE_MMA=0 or set_decode_mma_enabled(false) (tests and benchmarks compare).
bool decode_mma_enabled();
void set_decode_mma_enabled(bool on);
bool attention_decode_mma_applies(const ops::AttentionParams& p);
int attention_decode_mma_splits(const ops::AttentionParams& p, int n_sms);
cudaError_t prepare_attention_decode_mma();
cudaError_t launch_attention_decode_mma(const ops::AttentionParams& p, int n_splits, void* partials,
                                        uint32_t* counters, cudaStream_t stream, int n_sms);
// Stages and warps a block the tensor-core kernel runs p with in n_splits splits on n_sms SMs
// (decode_tuning().mma_stages / mma_warps, or the auto choice).
struct DecodeMmaShape {
  int stages;
  int warps;
};
DecodeMmaShape attention_decode_mma_shape(const ops::AttentionParams& p, int n_sms, int n_splits);
// Whether a launch of p with n_splits merges them in its last blocks (decode_tuning().combine;
// counters non-null, at most kDecodeCounters (token, head unit) pairs and
// kFusedCombineMaxSplits splits); units: the launch's head units per token, rows: query heads a
// block merges.
bool decode_fused_combine(const ops::AttentionParams& p, int n_splits, int units, int rows, const uint32_t* counters);
// Fallback for any float dtype and head_dim (attention_generic.cu): slow, always available.
cudaError_t launch_attention_generic(const ops::AttentionParams& p, cudaStream_t stream);

}  // namespace frugal::cuda
