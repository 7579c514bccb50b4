// Naive reference implementations of every op, on host memory, accumulating in double.
// The oracle for every backend in the op harness. Slow on purpose: clarity over speed.
#pragma once

#include "ops/op_list.h"
#include "ops/params.h"

namespace frugal::ops::ref {

// One function per op of ops/op_list.h (required and optional). Parameters are trusted: a
// broken one is a FRUGAL_CHECK failure, not a Status (the ref backend checks what callers send).
#define FRUGAL_REF_OP_(Name, method) void method(const Name##Params& p);
FRUGAL_ALL_OPS(FRUGAL_REF_OP_)
#undef FRUGAL_REF_OP_
// The uniform in (0, 1) sample() draws for (seed, token id): 24 bits of splitmix64.
float sample_uniform(uint64_t seed, uint64_t id);

// Element access helpers for any float dtype (f32, f16, bf16, f8_e4m3).
float load(DType t, const void* base, int64_t i);
void store(DType t, void* base, int64_t i, float v);

}  // namespace frugal::ops::ref
