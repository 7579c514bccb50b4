// cuBLASLt GEMM for m beyond the GEMV range: bf16/f16/f32 inputs, fp32 accumulation, bias fused
// as an epilogue, `accumulate` as beta = 1. Descriptors and the heuristic's algorithm are
// cached per shape, and the workspace is allocated once, so a call allocates nothing and can
// be captured into a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/status.h"
#include "ops/params.h"

namespace frugal::cuda {

class LtGemm {
 public:
  static Result<std::unique_ptr<LtGemm>> create(size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Whether run() takes these dtypes and layouts (w contiguous [n, k]).
  static bool supports(const ops::MatmulParams& p);
  Status run(const ops::MatmulParams& p, cudaStream_t stream);

 private:
  // (m, n, k, ld_x, ld_y, x/w dtype, y dtype, bias dtype or -1, accumulate)
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, bool>;
  struct Plan;

  LtGemm() = default;
  Result<Plan*> plan_for(const ops::MatmulParams& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace frugal::cuda
