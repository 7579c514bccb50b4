// The shared op harness (tests/ops) on the CUDA backend: every op against ops::ref on odd
// shapes, strided rows, guard bytes and NaN sentinels, in the backend's bf16 activations; once
// with the backend's default switches and once with every fused kernel on.
#include "harness.h"

FRUGAL_INSTANTIATE_OP_HARNESS(Cuda, "cuda");
// The same with every fused kernel switched on (rope_kv_write, the GEMV's silu epilogue, the FP8
// silu and norm quantizations, mla_kv_prologue, moe_router, rms_norm_matmul), including those off
// by default until measured: each fused path against the oracle on the harness's odd shapes.
FRUGAL_INSTANTIATE_OP_HARNESS(CudaAllFused, "cuda_fused");
// The quantized matmuls the GEMVs take (int4 / int8 / fp8 without act order) at every m up to
// kQuantGemvMaxM through the slab GEMM (the default from 9 tokens; here from one), on the same odd shapes.
FRUGAL_INSTANTIATE_OP_HARNESS(CudaSlab, "cuda_slab");
// The quantized matmuls of m <= 8 through the bulk GEMV (opt-in, sm_90; the default GEMV elsewhere).
FRUGAL_INSTANTIATE_OP_HARNESS(CudaBulk, "cuda_bulk");
// The same through the tile GEMV (the default at m <= 8 is the lean GEMV, same bits; the tile
// kernel stays for A/B and is held to the oracle too).
FRUGAL_INSTANTIATE_OP_HARNESS(CudaTile, "cuda_tile");
