// The CPU kernels of one instruction set, as a table of plain functions over index ranges.
// cpu_backend.cpp validates Params, splits work over the thread pool and calls these; each ISA's
// kernels live in their own translation unit (kernels_<isa>.cpp, compiled with that ISA's flags)
// built from the one generic body in kernels_impl.h. Only POD types cross this boundary so that
// no inline STL code compiled with AVX-512 flags can be picked by the linker for other callers.
#pragma once

#include <cstdint>

#include "ops/params.h"

namespace frugal::cpu {

// Matmul strategy constants shared by the dispatcher and the kernels.
inline constexpr int64_t kGemvMaxTokens = 8;   // m <= this: GEMV, each weight row streamed once
inline constexpr int64_t kGemmBlockN = 128;    // weight rows per packed GEMM block
inline constexpr int64_t kGemmBlockK = 256;    // k per packed GEMM block
inline constexpr int64_t kGemmPackFloats = kGemmBlockN * kGemmBlockK;

// Attention work item: query tokens [i0, i1) of sequence seq, all query heads of kv head kv_head.
struct AttentionItem {
  int32_t seq;
  int32_t kv_head;
  int32_t i0;
  int32_t i1;
};
inline constexpr int kAttentionChunk = 32;      // keys scored per online-softmax step
inline constexpr int kAttentionMaxRows = 64;    // query rows (tokens x group heads) per item
// Floats of scratch one attention call needs per thread.
inline int64_t attention_scratch_floats(int rows, int head_dim) {
  return static_cast<int64_t>(rows) * (2 * head_dim + 2) + 2 * kAttentionChunk + 64;
}

// The matmul kernels of one weight format (ops/weight_format.h). The backend picks them once
// per call from p.w.format (cpu_backend.cpp: matmul_kernels); a kernel never looks at the
// format again, so each format's inner loops carry no per-element dispatch.
struct MatmulKernels {
  // y[:, n0:n1] for all m tokens (any m; meant for m <= kGemvMaxTokens).
  void (*gemv)(const ops::MatmulParams& p, int64_t n0, int64_t n1);
  // y[:, n0:n1] by packed blocks; pack holds kGemmPackFloats floats. Null on the scalar table.
  void (*gemm)(const ops::MatmulParams& p, int64_t n0, int64_t n1, float* pack);
};

struct KernelTable {
  const char* isa;
  // Dense weights (WeightScheme::kDense) by dtype.
  MatmulKernels dense_f32;
  MatmulKernels dense_bf16;
  MatmulKernels dense_f16;
  void (*rms_norm)(const ops::RmsNormParams& p, int64_t r0, int64_t r1);
  void (*silu_mul)(const ops::SiluMulParams& p, int64_t t0, int64_t t1);
  void (*rope)(const ops::RopeParams& p, int64_t t0, int64_t t1);
  void (*kv_write)(const ops::KvWriteParams& p, int64_t t0, int64_t t1);
  void (*attention)(const ops::AttentionParams& p, const AttentionItem& item, float* scratch);
  // dst[0:n] = src[0:n] converted from src_dtype (f32/bf16/f16) to f32.
  void (*to_f32)(DType src_dtype, const void* src, float* dst, int64_t n);
};

// A kernel reached with a dtype validation should have refused: prints both and aborts. (Defined
// outside the ISA translation units; the kernels' dtype switches have no silent default.)
[[noreturn]] void unreachable_dtype(const char* kernel, DType t);

const KernelTable& scalar_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();
// The best table the CPU (capped by FRUGAL_ISA) can run.
const KernelTable& best_kernels();

}  // namespace frugal::cpu
