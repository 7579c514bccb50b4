// The CUDA backend: every op of ops::Backend on one device and one stream, bf16 activations
// with fp32 accumulation. Host code only (no device code here); kernels are in the .cu files
// behind kernels.h.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <string>
#include <vector>

#include "backend/cuda/kernels.h"
#include "backend/cuda/sampling.h"
#include "core/status.h"
#include "ops/backend.h"

namespace frugal::cuda {

class LtGemm;
class GraphCache;

class CudaBackend final : public ops::Backend {
 public:
  static Result<std::unique_ptr<CudaBackend>> create(int device);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  DType activation_dtype() const override { return DType::kBF16; }

  Result<void*> alloc(size_t nbytes) override;
  void free(void* ptr) override;
  // Synchronous with respect to `src`: large copies go through pinned staging buffers.
  Status upload(void* dst, const void* src, size_t nbytes) override;
  Status download(void* dst, const void* src, size_t nbytes) override;
  Status memset_zero(void* dst, size_t nbytes) override;
  Status synchronize() override;
  bool weights_in_host_memory() const override { return false; }
  Status device_memory(size_t* free_bytes, size_t* total_bytes) override;
  // int4 / int8 weights that tiles8_fits are re-laid into kOutInTiles8 (the GEMVs' warp loads
  // read 512 contiguous bytes) unless FRUGAL_QUANT_TILES=0 or set_quant_tiles(false); others
  // (fp8, which W8A8's cuBLASLt GEMM reads as rows) unchanged.
  Result<ops::WeightFormat> prepare_weight(const ops::WeightView& w, int64_t n, int64_t k) override;
  void set_quant_tiles(bool on) { quant_tiles_ = on; }

  FRUGAL_BACKEND_OP_OVERRIDES  // every op of ops/op_list.h
  Status rope_kv_write(const ops::RopeKvWriteParams& p) override;  // fused where rope_kv_write_fusable
  Status matmul_silu_mul(const ops::MatmulSiluMulParams& p) override;  // a GEMV's silu epilogue where it can
  Status silu_mul_matmul(const ops::SiluMulMatmulParams& p) override;  // silu_mul in W8A8's activation quantization
  Status mla_kv_prologue(const ops::MlaKvPrologueParams& p) override;
  Status moe_router(const ops::MoeRouterParams& p) override;  // one kernel where moe_router_fusable
  Status rms_norm_matmul(const ops::RmsNormMatmulParams& p) override;    // one GEMV where rms_norm_gemv_fusable  // one kernel where mla_kv_prologue_fusable
  Status attention_batched_matmul(const ops::AttentionBatchedMatmulParams& p) override;  // merge + W_UV where mla_combine_uv_fusable
  Status mla_attention(const ops::MlaAttentionParams& p) override;  // one persistent kernel where plan_mla_attention applies
  Status matmul_rms_norm(const ops::MatmulRmsNormParams& p) override;  // the norm in a split GEMM's epilogue
  Status matmul_rope_kv_write(const ops::MatmulRopeKvWriteParams& p) override;  // RoPE + KV write in a split GEMM's epilogue

  bool supports_sample() const override { return true; }
  Status sample(const SampleParams& p) override;

  // Step graphs (ops::Backend): one CUDA graph per key on this backend's stream.
  bool supports_graphs() const override { return true; }
  bool has_graph(uint64_t key) const override;
  Status capture_graph(uint64_t key, const std::function<Status()>& record) override;
  Status replay_graph(uint64_t key) override;
  int64_t graph_count() const override;
  int64_t graph_bytes() const override { return graph_bytes_; }

  // --- CUDA-only extensions ---
  // Page-locked host memory for the per-step id copy (download into it avoids a staging copy).
  Result<void*> alloc_pinned(size_t nbytes);
  void free_pinned(void* ptr);
  // Grows the op scratch (split-KV partials) to at least nbytes. Call before capturing a
  // graph: inside a capture the scratch cannot grow and an op that needs more fails.
  Status reserve_scratch(size_t nbytes);
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  int n_sms() const { return n_sms_; }
  // Set by CudaGraph around a capture: nothing may allocate or synchronize meanwhile.
  void set_capturing(bool on) { capturing_ = on; }
  bool capturing() const { return capturing_; }
  // Matmuls that ran FP8 W8A8 (cuBLASLt FP8) so far: lets tests see the path was taken.
  int64_t w8a8_calls() const { return w8a8_calls_; }
  // batched_matmul calls that ran as one strided-batched cuBLASLt matmul (not the GEMV, not the
  // per-entry loop) so far: lets tests see the path was taken.
  int64_t lt_batched_calls() const { return lt_batched_calls_; }
  // Why cuBLASLt last refused an FP8 W8A8 matmul (empty if it never did).
  const std::string& w8a8_fallback() const { return w8a8_fallback_; }
  // The FP8 GEMMs' fast accumulation for per-tensor / per-channel scales (LtGemm; on by default,
  // FRUGAL_FP8_FAST_ACCUM=0 off): tests run W8A8 both ways.
  void set_fp8_fast_accum(bool on);
  // FP8 weights run the weight-only GEMV up to this many tokens, W8A8 above (kFp8GemvMaxM; tests
  // set kQuantGemvMaxM to compare the GEMV with bf16 activations against an oracle without
  // activation rounding).
  void set_fp8_gemv_max_m(int64_t m) { fp8_gemv_max_m_ = m; }
  // The most scratch a quantized matmul past the GEMM's tokens may take for its weight
  // dequantized to bf16 (kDequantScratchMax; tests set less to run the row slices): a larger
  // weight (a quantized lm_head: vocab x hidden) is dequantized and multiplied a slice of rows
  // at a time, and in a capture, where the scratch cannot grow, slices of what it holds.
  void set_dequant_scratch_max(size_t bytes) { dequant_scratch_max_ = bytes; }
  // Fused ops (ops/op_list.h) in one kernel where the Params allow: rope_kv_write (on unless
  // FRUGAL_FUSE_ROPE_KV=0) and matmul_silu_mul (the GEMVs' silu epilogue; off unless
  // FRUGAL_FUSE_SILU=1: measured no faster). Off, each runs as its sequence of ops (A/B runs, tests). A captured
  // graph keeps the kernels it was captured with. The counts say how often a fused kernel ran.
  // mla_kv_prologue (MLA's norm, rope and latent cache write) likewise, on unless
  // FRUGAL_FUSE_MLA_PROLOGUE=0.
  void set_fuse_rope_kv(bool on) { fuse_rope_kv_ = on; }
  bool fuse_rope_kv() const { return fuse_rope_kv_; }
  int64_t fused_rope_kv_calls() const { return fused_rope_kv_calls_; }
  void set_fuse_silu_mul(bool on) { fuse_silu_mul_ = on; }
  bool fuse_silu_mul() const { return fuse_silu_mul_; }
  int64_t fused_silu_mul_calls() const { return fused_silu_mul_calls_; }
  // silu_mul_matmul with silu_mul folded into the FP8 W8A8 activation quantization (on unless
  // FRUGAL_FUSE_SILU_QUANT=0).
  void set_fuse_silu_quant(bool on) { fuse_silu_quant_ = on; }
  int64_t fused_silu_quant_calls() const { return fused_silu_quant_calls_; }
  void set_fuse_mla_prologue(bool on) { fuse_mla_prologue_ = on; }
  bool fuse_mla_prologue() const { return fuse_mla_prologue_; }
  int64_t fused_mla_prologue_calls() const { return fused_mla_prologue_calls_; }
  // attention_batched_matmul as MLA's split merge and W_UV in one kernel (on unless
  // FRUGAL_FUSE_MLA_UV=0).
  void set_fuse_mla_uv(bool on) { fuse_mla_uv_ = on; }
  bool fuse_mla_uv() const { return fuse_mla_uv_; }
  int64_t fused_mla_uv_calls() const { return fused_mla_uv_calls_; }
  // mla_attention's prologue and absorbed q projection as one launch where the Params promise
  // absorb_rope_identity (mla_prologue_absorb_fusable; on unless FRUGAL_FUSE_MLA_PRO_ABS=0).
  void set_fuse_mla_prologue_absorb(bool on) { fuse_mla_pro_abs_ = on; }
  int64_t fused_mla_prologue_absorb_calls() const { return fused_mla_pro_abs_calls_; }
  // mla_attention as one persistent kernel (kernels.h, plan_mla_attention; off unless
  // FRUGAL_FUSE_MLA_ATTN=1 or set_mla_attention_enabled(true), process-wide).
  int64_t fused_mla_attention_calls() const { return fused_mla_attention_calls_; }
  // The persistent MLA kernel's step stamps (a diagnostic; kernels.h, launch_mla_attention):
  // launches after this call (and graphs captured after it) write their %globaltimer stamps into
  // a ring of `slots` launches; 0 turns them off. FRUGAL_MLA_ATTN_STAMPS=<slots> turns them on at
  // creation and prints summarize_mla_attention_stamps' medians to stderr when the backend goes.
  Status set_mla_attention_stamps(int slots);
  // The ring as the kernel wrote it ([slots][n_sms()][kMlaAttnStamps]; synchronizes the stream).
  Result<std::vector<unsigned long long>> mla_attention_stamps();
  int mla_attention_stamp_slots() const { return mla_stamp_slots_; }
  // The split GEMM's epilogues: where a quantized matmul runs the slab GEMM in more than one k
  // slice, matmul_rms_norm's norm, matmul_silu_mul's silu_mul and matmul_rope_kv_write's RoPE and
  // cache write add its f32 partials themselves (split_rms_norm / split_silu_mul /
  // split_rope_kv_write, kernels.h) instead of the reduce kernel then their own: one
  // launch and one round trip of y fewer, the same bits. On unless FRUGAL_FUSE_SPLIT=0.
  void set_fuse_split(bool on) { fuse_split_ = on; }
  bool fuse_split() const { return fuse_split_; }
  int64_t fused_split_calls() const { return fused_split_calls_; }
  // moe_router (DeepSeekMoE's input norm, router GEMV and routing) fused, where the matmul runs
  // the GEMV: route mode 1, one cluster kernel (sm_90; the norm inside it where it fits, else its
  // own kernel first); 2, the cluster kernel after the norm's own kernel; 3, the norm's kernel
  // then one grid kernel whose last block routes (launch_moe_router_grid). 0 (the default): the
  // three ops. FRUGAL_FUSE_ROUTE=1|2|3; all three measured slower (V2-Lite
  // batch 1, H100 2026-12-05: 3 342.1, 2 322.0 against 365.1 tok/s; docs/perf/2026-12-05-session43.md;
  // 2026-12-07: 1 345.0, 3 367.4 against 391.2). With their PDL trigger after the router rows
  // are read (moe.cu), no better (2026-12-08: 1 346.5, 3 367.9 against 392.5).
  void set_fuse_route(bool on) { route_mode_ = on ? 1 : 0; }
  void set_route_mode(int mode) { route_mode_ = mode >= 0 && mode <= 3 ? mode : 0; }
  bool fuse_route() const { return route_mode_ != 0; }
  int route_mode() const { return route_mode_; }
  int64_t fused_route_calls() const { return fused_route_calls_; }
  // rms_norm_matmul at m = 1 as one GEMV with the norm in its prologue, and over FP8 W8A8 weights
  // with the norm in the activation quantization; off unless FRUGAL_FUSE_NORM=1 until measured on
  // the H200. The counts: GEMV launches, W8A8 quantizations.
  void set_fuse_norm(bool on) { fuse_norm_ = on; }
  bool fuse_norm() const { return fuse_norm_; }
  int64_t fused_norm_calls() const { return fused_norm_calls_; }
  int64_t fused_norm_quant_calls() const { return fused_norm_quant_calls_; }
  // This backend's quantized GEMM kernel and its first m (kernels.h; kDefault / -1: the
  // process-wide choice, FRUGAL_QGEMM_KERNEL / FRUGAL_QGEMM_MIN_M; min_m 0: never the GEMM, 1:
  // every m up to kQuantGemvMaxM). Call outside a capture (the slab kernels' limits are raised here).
  void set_quant_gemm(QuantGemmKernel kernel, int min_m);
  // This backend's quantized GEMV kernel at m <= 8 (kernels.h; kDefault: the process-wide choice,
  // FRUGAL_QGEMV_KERNEL / set_quant_gemv_kernel).
  void set_quant_gemv(QuantGemvKernel kernel) { quant_gemv_kernel_ = kernel; }

 private:
  CudaBackend() = default;
  Status check_launch(cudaError_t e, const char* op);
  Status matmul_dense(const ops::MatmulParams& p);
  Status matmul_quant(const ops::MatmulParams& p);
  // silu: x is silu(silu->gate) * silu->up (x itself unwritten), quantized in one kernel; norm:
  // x is rms_norm(norm) (likewise; rows past the last multiple of 4 are normalized into norm.y
  // for the weight-only GEMV).
  Status matmul_w8a8(const ops::MatmulParams& p, const ops::SiluMulParams* silu = nullptr,
                     const ops::RmsNormParams* norm = nullptr);
  Status quant_gemv_or_gemm(const ops::MatmulParams& p);
  // Where p runs the slab GEMM in more than one k slice (matmul_quant's route) and fuse_split_:
  // enqueues it into f32 partials in the scratch, without the reduce kernel, and returns them
  // (*splits the slices); else nullptr, nothing enqueued (the caller runs its sequence).
  Result<const float*> matmul_to_partials(const ops::MatmulParams& p, int* splits);
  // matmul_to_partials, then `launch` (the op's split epilogue) over the partials: true where it
  // ran (counted in fused_split_calls_), false where mm runs otherwise (nothing enqueued).
  Result<bool> split_epilogue(const ops::MatmulParams& mm, const char* what,
                              const std::function<cudaError_t(const float*, int)>& launch);
  // The weight dequantized to bf16 in the scratch and multiplied by cuBLASLt, in slices of rows
  // that fit (set_dequant_scratch_max); kUnsupported when no slice fits or cuBLASLt refuses.
  Status matmul_dequant_lt(const ops::MatmulParams& p);
  // matmul_dense runs the GEMV (not cuBLASLt); matmul_quant runs quant_gemv_or_gemm first.
  Result<bool> dense_takes_gemv(const ops::MatmulParams& p);
  bool quant_gemv_ok(const ops::MatmulParams& p) const;
  int64_t quant_gemv_max_m(const ops::MatmulParams& p) const;
  bool quant_gemv_first(const ops::MatmulParams& p) const;
  bool matmul_goes_w8a8(const ops::MatmulParams& p) const;
  Status run_lt(const ops::MatmulParams& p);
  Result<bool> small_m_prefers_lt(const ops::MatmulParams& p);
  Result<void*> scratch(size_t nbytes);

  int device_ = 0;
  int n_sms_ = 0;
  int cc_major_ = 0;
  int64_t w8a8_calls_ = 0;
  int64_t lt_batched_calls_ = 0;
  int64_t fp8_gemv_max_m_ = -1;  // -1: kFp8GemvMaxM
  bool fuse_rope_kv_ = true;
  bool quant_tiles_ = true;
  bool fuse_silu_mul_ = true;
  bool fuse_silu_quant_ = true;
  int64_t fused_silu_quant_calls_ = 0;
  bool fuse_mla_prologue_ = true;
  int64_t fused_rope_kv_calls_ = 0;
  int64_t fused_silu_mul_calls_ = 0;
  int64_t fused_mla_prologue_calls_ = 0;
  bool fuse_mla_uv_ = true;
  int64_t fused_mla_uv_calls_ = 0;
  bool fuse_mla_pro_abs_ = true;
  int64_t fused_mla_pro_abs_calls_ = 0;
  int64_t fused_mla_attention_calls_ = 0;
  size_t max_smem_optin_ = 0;  // a block's dynamic shared memory limit
  unsigned long long* grid_sync_ = nullptr;  // the persistent MLA kernel's barrier counter (never reset)
  unsigned long long* mla_stamps_ = nullptr;  // set_mla_attention_stamps' ring, or nullptr
  std::vector<unsigned long long*> retired_mla_stamps_;  // earlier rings (captured graphs may write them)
  int mla_stamp_slots_ = 0;
  bool mla_stamps_report_ = false;  // FRUGAL_MLA_ATTN_STAMPS: the summary to stderr at destruction
  bool fuse_split_ = true;
  int64_t fused_split_calls_ = 0;
  int route_mode_ = 0;  // set_route_mode
  uint32_t* route_counter_ = nullptr;  // one word, zero between launches (launch_moe_router_grid)
  int64_t fused_route_calls_ = 0;
  bool fuse_norm_ = false;
  int64_t fused_norm_calls_ = 0;
  int64_t fused_norm_quant_calls_ = 0;
  QuantGemmKernel quant_gemm_kernel_ = QuantGemmKernel::kDefault;
  int quant_gemm_min_m_ = -1;
  QuantGemvKernel quant_gemv_kernel_ = QuantGemvKernel::kDefault;
  std::string w8a8_fallback_;
  bool capturing_ = false;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<LtGemm> lt_;
  std::unique_ptr<GraphCache> graphs_;
  // (m, n, k, ld_x, ld_y, y dtype, bias, accumulate) -> cuBLASLt measured faster than the GEMV
  using SmallMKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, bool>;
  std::map<SmallMKey, bool> small_m_choice_;
  std::atomic<int64_t> graph_bytes_{0};
  uint32_t* decode_counters_ = nullptr;  // kDecodeCounters words, zero between launches (kernels.h)
  void* scratch_ = nullptr;  // grown on demand outside captures
  size_t scratch_bytes_ = 0;
  static constexpr size_t kDequantScratchMax = size_t{512} << 20;
  size_t dequant_scratch_max_ = kDequantScratchMax;
  static constexpr int kStaging = 2;  // double-buffered pinned upload staging
  void* staging_[kStaging] = {};
  cudaEvent_t staging_done_[kStaging] = {};
  size_t staging_bytes_ = 0;
};

// The factory the rest of the project uses (make_backend_by_name("cuda")).
Result<std::unique_ptr<ops::Backend>> make_cuda_backend(int device);

}  // namespace frugal::cuda

namespace frugal {
using cuda::make_cuda_backend;  // callable as frugal::make_cuda_backend too
}  // namespace frugal
