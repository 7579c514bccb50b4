// cuBLASLt GEMM for m beyond the GEMV range: bf16/f16/f32 inputs, fp32 accumulation, bias fused
// as an epilogue, `accumulate` as beta = 1; and the strided-batched form of it (MLA's per-head
// projections, one launch for every head). Descriptors and the heuristic's algorithm are cached
// per shape, and the workspace is allocated once, so a call allocates nothing and can be
// captured into a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/status.h"
#include "ops/params.h"

namespace frugal::cuda {

// An FP8 E4M3 x E4M3 GEMM with fp32 accumulation and float scales (W8A8): y[m, n] = (x * sx) @
// (w * sw)^T (+ bias) (+ y). cuBLASLt 12.9+ on sm_90.
struct Fp8Gemm {
  enum class Scales {
    kRow,       // sw [n] per output row, sx [m] per token (cuBLASLt OUTER_VEC_32F on both)
    kBlock128,  // sw [ceil(n / 128)][ld_sw] per 128 x 128 block (BLK128x128_32F), ld_sw the k-block
                // count rounded up to 4; sx [ceil(k / 128)][ld_sx] per token and 128 inputs
                // (VEC128_32F), token fastest, ld_sx = m rounded up to 4
  };
  int64_t m = 0, n = 0, k = 0;  // k: the codes per row (a multiple of 16)
  const void* w = nullptr;      // [n][ld_w] E4M3
  int64_t ld_w = 0;
  const void* x = nullptr;      // [m][ld_x] E4M3
  int64_t ld_x = 0;
  const float* sw = nullptr;
  const float* sx = nullptr;
  Scales scales = Scales::kRow;
  void* y = nullptr;            // [m][ld_y] bf16
  int64_t ld_y = 0;
  const void* bias = nullptr;   // [n] bf16 or null
  bool accumulate = false;
};

class LtGemm {
 public:
  static Result<std::unique_ptr<LtGemm>> create(size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Whether run() takes these dtypes and layouts (w contiguous [n, k]).
  static bool supports(const ops::MatmulParams& p);
  Status run(const ops::MatmulParams& p, cudaStream_t stream);
  // kUnsupported when this cuBLASLt or GPU has no algorithm for it (the caller falls back).
  Status run_fp8(const Fp8Gemm& g, cudaStream_t stream);
  // FP8 GEMMs with per-tensor / per-channel scales use Hopper's fast accumulation
  // (CUBLASLT_MATMUL_DESC_FAST_ACCUM: the tensor cores' own accumulator over the whole k, not
  // promoted to fp32 every few k steps), as vLLM's and TensorRT-LLM's FP8 GEMMs do: measured
  // 7B 2048-token prefill +10% (docs/perf/2026-12-05-session39.md), within cuda_w8a8_test's bound.
  // 128 x 128 block scales keep the promoted accumulation (cuBLASLt has no algorithm with it,
  // and it is DeepSeek-V3's recipe). FRUGAL_FP8_FAST_ACCUM=0 or set_fp8_fast_accum(false) turns
  // it off; plans of either kind are kept apart.
  void set_fp8_fast_accum(bool on) { fp8_fast_accum_ = on; }
  bool fp8_fast_accum() const { return fp8_fast_accum_; }
  // Whether run_batched() takes these dtypes and strides (x and w of one dtype, y that dtype or
  // f32, non-negative strides, batch within int32).
  static bool supports(const ops::BatchedMatmulParams& p);
  // Every batch entry in one strided-batched cuBLASLt matmul. kUnsupported when cuBLASLt has no
  // algorithm for this shape at these operands' alignment (the caller loops over the batch).
  Status run_batched(const ops::BatchedMatmulParams& p, cudaStream_t stream);

 private:
  // (m, n, k, ld_x, ld_y, x/w dtype, y dtype, bias dtype or -1, accumulate)
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, bool>;
  struct Plan;

  // The byte alignment of A (w), B (x), C = D (y) the heuristic may assume; cuBLASLt's default
  // preference is 256 for every operand.
  struct Alignment {
    uint32_t a = 256, b = 256, c = 256;
  };

  LtGemm() = default;
  Status start_plan(Plan* plan, const cudaDataType_t* bias_t);
  bool pick_algo(Plan* plan, const Alignment& align);
  Result<Plan*> plan_for(const ops::MatmulParams& p);
  // (m, n, k, ld_w, ld_x, ld_y, scales, bias, accumulate, fast accumulation)
  using Fp8Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, bool, bool>;
  bool fp8_fast_accum_ = false;
  Result<Plan*> plan_fp8(const Fp8Gemm& g);
  std::map<Fp8Key, std::unique_ptr<Plan>> fp8_plans_;
  // A batched plan holds the batch count and strides in its layouts, and its algorithm is picked
  // for the operands' alignment: all of it is in the key. A null plan caches a refusal.
  struct BatchedKey {
    int64_t m, n, k, ld_x, ld_y, stride_x, stride_w, stride_y, batch;
    int x_dtype, y_dtype;
    uint32_t align_w, align_x, align_y;
    auto operator<=>(const BatchedKey&) const = default;
  };
  Result<Plan*> plan_batched(const ops::BatchedMatmulParams& p, const BatchedKey& key);
  std::map<BatchedKey, std::unique_ptr<Plan>> batched_plans_;

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace frugal::cuda
