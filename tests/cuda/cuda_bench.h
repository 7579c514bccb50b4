// Shared pieces of cuda_kernel_bench: CUDA-event timing with median and a 95% confidence
// interval, and the result table printed last.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace frugal::cuda::bench {

struct Timing {
  double median_us = 0, lo_us = 0, hi_us = 0;  // 95% CI of the median (order statistics)
};

// Times `enqueue(i)` (i counts calls, for rotating inputs): warm-up, then `reps` samples of
// `inner` back-to-back calls each; a sample is the mean time per call of its batch.
inline Timing time_op(cudaStream_t s, int reps, int inner, const std::function<void(int)>& enqueue) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  int call = 0;
  for (int i = 0; i < 3 * inner; ++i) enqueue(call++);
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, s);
    for (int i = 0; i < inner; ++i) enqueue(call++);
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    us.push_back(1000.0 * ms / inner);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(us.begin(), us.end());
  const double n = static_cast<double>(us.size()), half = 0.98 * std::sqrt(n);
  auto at = [&](double i) { return us[static_cast<size_t>(std::clamp(i, 0.0, n - 1))]; };
  return {at(n / 2), at(std::floor(n / 2 - half)), at(std::ceil(n / 2 + half))};
}

struct Row {
  std::string name;
  Timing t;
  double value;      // achieved GB/s or TFLOP/s or tok/s
  std::string unit;
  double pct;        // of the ceiling, < 0 when none applies
};

class Table {
 public:
  void add(Row r) {
    std::printf("%-46s %10.2f us [%8.2f, %8.2f]  %9.1f %-7s %s\n", r.name.c_str(), r.t.median_us, r.t.lo_us,
                r.t.hi_us, r.value, r.unit.c_str(), r.pct >= 0 ? (std::to_string(static_cast<int>(r.pct + 0.5)) + "%").c_str() : "");
    std::fflush(stdout);
    rows_.push_back(std::move(r));
  }
  void print() const {
    std::printf("\n=== cuda_kernel_bench summary (median us, 95%% CI; %% of measured ceiling) ===\n");
    for (const auto& r : rows_)
      std::printf("%-46s %10.2f us  %9.1f %-7s %s\n", r.name.c_str(), r.t.median_us, r.value, r.unit.c_str(),
                  r.pct >= 0 ? (std::to_string(static_cast<int>(r.pct + 0.5)) + "%").c_str() : "");
  }

 private:
  std::vector<Row> rows_;
};

// Device memory filled with uniform random values (never zeros: speed must not depend on it).
void* random_buffer(CudaBackend* b, DType t, int64_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);

// The synthetic DeepSeek-R1-Distill-Qwen-7B step (cuda_bench_decode.cpp): batch-1 decode as a
// CUDA graph and a 2048-token prefill, reported as tok/s with bandwidth / FLOP accounting.
void bench_model_7b(CudaBackend* b, double ceiling_gbs, Table* table);

// Decode attention at the 7B shape, the tensor-core kernel against the CUDA-core one, bf16 and
// fp8 caches: one sequence at 32k and 256 sequences at 1k and 2k (cuda_bench_decode.cpp).
void bench_decode_attention(CudaBackend* b, double ceiling_gbs, Table* table);
// Decode attention (with its combine) at forced split counts, the default and the wave rule,
// over batch sizes 1..256 (--decode-splits).
void bench_decode_splits(CudaBackend* b, double ceiling_gbs, Table* table);

// The quantized GEMV / GEMM paths on the 7B shapes (cuda_bench_quant.cpp).
void bench_quant(CudaBackend* b, double ceiling_gbs, Table* table);

// Reads an n x row_bytes matrix of codes (n % 16 == 0, row_bytes % 64 == 0) with no arithmetic,
// in the lean quantized GEMV's order (16-row tiles, 8 rows x 64 bytes a warp load) or, linear,
// the same tiles' bytes 512 contiguous bytes a warp load; `warps` 4 | 8 a block, at most
// `blocks_per_sm` blocks an SM (0: as many as fit); one XOR word a warp into out[n / 16 * warps]
// (cuda_bench_load.cu).
cudaError_t launch_load_pattern(const void* codes, int64_t n, int64_t row_bytes, int warps, bool linear,
                                int blocks_per_sm, uint32_t* out, cudaStream_t s);

// The routed experts at DeepSeek-V2-Lite's shape, mma.sync against WMMA expert GEMMs, at 64,
// 256 and 512 decoding sequences and an 8192-token prefill step (cuda_bench_moe.cpp).
void bench_moe(CudaBackend* b, double ceiling_gbs, Table* table);

}  // namespace frugal::cuda::bench
