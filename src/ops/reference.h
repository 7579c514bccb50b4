// Naive reference implementations of every op, on host memory, accumulating in double.
// The oracle for every backend in the op harness. Slow on purpose: clarity over speed.
#pragma once

#include "ops/params.h"

namespace frugal::ops::ref {

void embedding(const EmbeddingParams& p);
void rms_norm(const RmsNormParams& p);
void matmul(const MatmulParams& p);
void rope(const RopeParams& p);
void kv_write(const KvWriteParams& p);
void attention(const AttentionParams& p);
void silu_mul(const SiluMulParams& p);
void gather_rows(const GatherRowsParams& p);
void sample(const SampleParams& p);
// The uniform in (0, 1) sample() draws for (seed, token id): 24 bits of splitmix64.
float sample_uniform(uint64_t seed, uint64_t id);

// Element access helpers for any float dtype (f32, f16, bf16, f8_e4m3).
float load(DType t, const void* base, int64_t i);
void store(DType t, void* base, int64_t i, float v);

}  // namespace frugal::ops::ref
